# The sparkop operator image, for people who build with a container engine:
#   docker build -t sparkop.io/sparkop:0.1.0 .
# devcluster/images.py builds the same image without one (`python -m devcluster images`), and
# tests/unit/test_operator_image.py keeps the two equivalent: the same Debian bookworm python3,
# the same locked wheels (deploy/requirements.lock, x86_64), the same user, entrypoint and env.

# Wheels are installed by pip in a Python image of the same minor version; the final image has
# Debian's python3 and no pip.
FROM docker.io/library/python:3.11-slim-bookworm AS install
WORKDIR /src
COPY deploy/requirements.lock deploy/requirements.lock
RUN pip install --quiet --disable-pip-version-check --no-deps --no-compile --target /deps \
      --require-hashes --only-binary=:all: -r deploy/requirements.lock
# The one package, sparkop, and the layer folders its symlinks (sparkop/core -> ../core, ...) stand
# for: devcluster/, tests/ and bench/ stay out.
COPY pyproject.toml README.md ./
COPY api api
COPY apps_controller apps_controller
COPY connect_controller connect_controller
COPY core core
COPY domain domain
COPY driver_controller driver_controller
COPY history_controller history_controller
COPY schedule_controller schedule_controller
COPY sparkop sparkop
RUN pip install --quiet --disable-pip-version-check --no-deps --no-compile --target /app . \
 && rm -rf /deps/bin /app/bin

FROM docker.io/library/debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates python3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=install /deps /usr/local/lib/python3.11/dist-packages
COPY --from=install /app /usr/local/lib/python3.11/dist-packages
COPY deploy/image/sparkop /usr/local/bin/sparkop
# Bytecode checked by hash, so a read-only root filesystem never needs a __pycache__ write.
RUN python3 -m compileall -q --invalidation-mode unchecked-hash /usr/local/lib/python3.11/dist-packages \
 && echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'nonroot:x:65532:' >> /etc/group \
 && mkdir -p /home/nonroot && chown 65532:65532 /home/nonroot
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/sparkop"]
CMD ["run"]
