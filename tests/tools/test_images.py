"""devcluster.images without mmdebstrap: the docker-archive writer, cache keys, names, entrypoint."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from devcluster import images
from devcluster.images import (
    BASE_RECIPE,
    SPARK_IMAGE_DIR,
    ImageConfig,
    LayerBuilder,
    base_key,
    normalise_ref,
    normalise_rootfs_tar,
    pause_key,
    read_archive,
    spark_key,
    spark_refs,
    write_docker_archive,
)
from sparkop.api import spark_lines

CONFIG = ImageConfig(
    entrypoint=("/bin/tool",), cmd=("--help",), env=("PATH=/bin", "A=1"), working_dir="/work", user="185"
)


def _tiny_layer(tmp_path: Path) -> images.Layer:
    layer = LayerBuilder()
    layer.file("bin/tool", b"#!/bin/sh\necho hi\n", 0o755)
    layer.directory("work", 0o775, 185)
    layer.symlink("usr/bin/tool", "/bin/tool")
    return layer.write(tmp_path / "layer.tar")


def _archive_members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else b"") for m in tar}  # type: ignore[union-attr]


def test_docker_archive_names_its_layers_by_diff_id_and_carries_the_runtime_config(tmp_path: Path) -> None:
    layer = _tiny_layer(tmp_path)
    archive = tmp_path / "image.tar"
    write_docker_archive(archive, [layer], CONFIG, ["docker.io/library/tool:1"], ["made by a test"])

    members = _archive_members(archive)
    (manifest,) = json.loads(members["manifest.json"])
    assert manifest["RepoTags"] == ["docker.io/library/tool:1"]
    layer_bytes = members[manifest["Layers"][0]]
    layer_hex = hashlib.sha256(layer_bytes).hexdigest()
    assert manifest["Layers"] == [f"{layer_hex}/layer.tar"]
    config_bytes = members[manifest["Config"]]
    assert manifest["Config"] == f"{hashlib.sha256(config_bytes).hexdigest()}.json"
    config = json.loads(config_bytes)
    assert (config["architecture"], config["os"]) == ("amd64", "linux")
    assert config["rootfs"] == {"type": "layers", "diff_ids": [f"sha256:{layer_hex}"]}
    assert config["config"] == {
        "Entrypoint": ["/bin/tool"],
        "Cmd": ["--help"],
        "Env": ["PATH=/bin", "A=1"],
        "WorkingDir": "/work",
        "User": "185",
    }
    assert [h["created_by"] for h in config["history"]] == ["made by a test"]
    assert not any(name.endswith(".tmp-" + str(os.getpid())) for name in os.listdir(tmp_path))


def test_layer_entries_are_sorted_with_parents_fixed_owners_and_mtimes(tmp_path: Path) -> None:
    layer = _tiny_layer(tmp_path)
    with layer.open() as stream, tarfile.open(fileobj=stream) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["bin", "bin/tool", "usr", "usr/bin", "usr/bin/tool", "work"]
    by_name = {m.name: m for m in members}
    assert by_name["bin/tool"].mode == 0o755
    assert (by_name["work"].uid, by_name["work"].mode) == (185, 0o775)
    assert by_name["usr/bin/tool"].issym() and by_name["usr/bin/tool"].linkname == "/bin/tool"
    assert {m.mtime for m in members} == {images.SOURCE_DATE_EPOCH}
    assert {m.uid for m in members if m.name != "work"} == {0}


def test_same_inputs_give_the_same_archive_bytes(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    for directory in (first, second):
        write_docker_archive(directory / "image.tar", [_tiny_layer(directory)], CONFIG, ["x:1"], ["h"])
    assert (first / "image.tar").read_bytes() == (second / "image.tar").read_bytes()


def test_read_archive_gives_back_the_layers_as_written(tmp_path: Path) -> None:
    layer = _tiny_layer(tmp_path)
    archive = tmp_path / "image.tar"
    write_docker_archive(archive, [layer], CONFIG, ["x:1"], ["h"])
    manifest, diff_ids, layers = read_archive(archive)
    assert diff_ids == [layer.diff_id] and manifest["RepoTags"] == ["x:1"]
    with layers[0].open() as stream:
        assert f"sha256:{hashlib.sha256(stream.read()).hexdigest()}" == layer.diff_id


def test_rootfs_tar_loses_device_nodes_and_leading_dot_slash(tmp_path: Path) -> None:
    source = tmp_path / "rootfs.tar"
    with tarfile.open(source, "w") as tar:
        for name, kind in (("./", tarfile.DIRTYPE), ("./dev/", tarfile.DIRTYPE), ("./dev/null", tarfile.CHRTYPE)):
            info = tarfile.TarInfo(name)
            info.type = kind
            tar.addfile(info)
        data = b"root:x:0:0::/root:/bin/bash\n"
        info = tarfile.TarInfo("./etc/passwd")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("./etc/passwd-")
        link.type, link.linkname = tarfile.LNKTYPE, "./etc/passwd"
        tar.addfile(link)

    layer = normalise_rootfs_tar(source, tmp_path / "layer.tar")

    with tarfile.open(tmp_path / "layer.tar") as tar:
        members = {m.name: m for m in tar}
        assert tar.extractfile("etc/passwd").read() == data  # type: ignore[union-attr]
    assert sorted(members) == ["dev", "etc/passwd", "etc/passwd-"]
    assert members["etc/passwd-"].linkname == "etc/passwd"
    assert layer.diff_id == f"sha256:{hashlib.sha256((tmp_path / 'layer.tar').read_bytes()).hexdigest()}"


def test_every_input_changes_the_key() -> None:
    sources = b"Types: deb\nURIs: http://deb.debian.org/debian\n"
    base = base_key(sources)
    assert base == base_key(sources)
    assert base != base_key(sources + b"# another mirror\n")
    assert base != base_key(sources, images.BaseRecipe(packages=(*BASE_RECIPE.packages, "vim")))

    files = [("entrypoint.sh", b"#!/bin/bash\n"), ("SparkPi.java", b"class SparkPi {}")]
    spark = spark_key(base, "3.5.9", b"pyspark/__init__.py,sha256=x,1\n", files)
    assert spark == spark_key(base, "3.5.9", b"pyspark/__init__.py,sha256=x,1\n", list(reversed(files)))
    variants = {
        spark_key(base_key(b"other"), "3.5.9", b"pyspark/__init__.py,sha256=x,1\n", files),
        spark_key(base, "4.0.5", b"pyspark/__init__.py,sha256=x,1\n", files),
        spark_key(base, "3.5.9", b"pyspark/__init__.py,sha256=y,1\n", files),
        spark_key(base, "3.5.9", b"pyspark/__init__.py,sha256=x,1\n", [files[0], ("SparkPi.java", b"changed")]),
    }
    assert spark not in variants and len(variants) == 4
    assert pause_key("a" * 64) != pause_key("b" * 64)


def test_one_spark_image_is_pinned_for_each_line_sparkop_renders_oldest_first() -> None:
    pinned = images.pinned_spark_versions()
    lines = [spark_lines.line_of(version) for version in pinned]
    assert lines == list(spark_lines.KNOWN_LINES), (
        f"SPARK_IMAGE_VERSIONS {pinned} vs lines {spark_lines.KNOWN_LINES_TEXT}"
    )


def test_spark_image_sources_are_part_of_the_key() -> None:
    names = [name for name, _ in images.spark_image_files()]
    assert {"entrypoint.sh", "SparkPi.java"} <= set(names)


@pytest.mark.parametrize(
    ("ref", "normalised"),
    [
        ("apache/spark:3.5.9", "docker.io/apache/spark:3.5.9"),
        ("spark:3.5.9", "docker.io/library/spark:3.5.9"),
        ("busybox", "docker.io/library/busybox:latest"),
        ("docker.io/apache/spark:4.0.5", "docker.io/apache/spark:4.0.5"),
        ("index.docker.io/library/spark:4.0.5", "docker.io/library/spark:4.0.5"),
        ("sparkop.io/devcluster/base:latest", "sparkop.io/devcluster/base:latest"),
        ("localhost/pause", "localhost/pause:latest"),
        ("registry:5000/team/app", "registry:5000/team/app:latest"),
        ("apache/spark@sha256:" + "a" * 64, "docker.io/apache/spark@sha256:" + "a" * 64),
    ],
)
def test_normalise_ref_like_docker(ref: str, normalised: str) -> None:
    assert normalise_ref(ref) == normalised


def test_spark_refs_cover_the_names_users_write_and_are_already_normalised() -> None:
    refs = spark_refs("3.5.9", "2.12")
    assert all(normalise_ref(ref) == ref for ref in refs)
    for written in ("apache/spark:3.5.9", "spark:3.5.9-python3", "apache/spark:3.5.9-scala2.12-java17-python3-ubuntu"):
        assert normalise_ref(written) in refs


def test_passwd_line_replaces_an_existing_entry_of_that_name() -> None:
    merged = images._with_line(
        b"root:x:0:0::/root:/bin/bash\nspark:x:1:1::/:/bin/sh\n", "spark:x:185:185::/opt/spark:/bin/false"
    )
    assert merged == b"root:x:0:0::/root:/bin/bash\nspark:x:185:185::/opt/spark:/bin/false\n"


def _run_entrypoint(tmp_path: Path, args: list[str], env: dict[str, str]) -> list[str]:
    """The entrypoint with tini and setpriv replaced by stand-ins that print what they would run."""
    fake_tini = tmp_path / "tini"
    fake_tini.write_text('#!/bin/bash\n[ "$1 $2" = "-s --" ] || exit 9\nshift 2\nprintf "%s\\n" "$@"\n')
    fake_setpriv = tmp_path / "setpriv"
    fake_setpriv.write_text('#!/bin/bash\necho "as-user $1 $2 $3"\nshift 3\nexec "$@"\n')
    script = (SPARK_IMAGE_DIR / "entrypoint.sh").read_text()
    script = script.replace("/usr/bin/tini", str(fake_tini)).replace("echo setpriv", f"echo {fake_setpriv}")
    entrypoint = tmp_path / "entrypoint.sh"
    entrypoint.write_text(script)
    for path in (fake_tini, fake_setpriv, entrypoint):
        path.chmod(0o755)
    base_env = {"PATH": os.environ["PATH"], "SPARK_HOME": "/opt/spark", "JAVA_HOME": "/jre"}
    result = subprocess.run(
        [str(entrypoint), *args], env={**base_env, **env}, cwd=tmp_path, capture_output=True, text=True, check=True
    )
    lines = result.stdout.splitlines()
    return lines[1:] if lines and lines[0].startswith("as-user") else lines


def test_entrypoint_executor_runs_the_kubernetes_backend_with_the_drivers_env(tmp_path: Path) -> None:
    env = {
        "SPARK_JAVA_OPT_10": "-Dten=10",
        "SPARK_JAVA_OPT_2": "-Dtwo=2",
        "SPARK_JAVA_OPT_0": "-Dzero=with space",
        "SPARK_EXECUTOR_MEMORY": "1024m",
        "SPARK_CLASSPATH": "/extra/*",
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@driver-svc.ns.svc:7078",
        "SPARK_EXECUTOR_ID": "3",
        "SPARK_EXECUTOR_CORES": "2",
        "SPARK_APPLICATION_ID": "spark-abc",
        "SPARK_EXECUTOR_POD_IP": "10.88.0.7",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "app-exec-3",
    }
    argv = _run_entrypoint(tmp_path, ["executor"], env)
    assert argv == [
        "/jre/bin/java",
        "-Dzero=with space",
        "-Dtwo=2",
        "-Dten=10",
        "-Xms1024m",
        "-Xmx1024m",
        "-cp",
        f"/opt/spark/conf:/extra/*:/opt/spark/jars/*:{tmp_path}",
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url",
        "spark://CoarseGrainedScheduler@driver-svc.ns.svc:7078",
        "--executor-id",
        "3",
        "--cores",
        "2",
        "--app-id",
        "spark-abc",
        "--hostname",
        "10.88.0.7",
        "--resourceProfileId",
        "0",
        "--podName",
        "app-exec-3",
    ]


def test_entrypoint_conf_dirs_come_first_on_the_executor_classpath(tmp_path: Path) -> None:
    argv = _run_entrypoint(tmp_path, ["executor"], {"SPARK_CONF_DIR": "/conf", "HADOOP_CONF_DIR": "/hadoop"})
    assert argv[argv.index("-cp") + 1] == f"/conf:/hadoop:/opt/spark/jars/*:{tmp_path}"


def test_entrypoint_driver_submits_in_client_mode_bound_to_the_pod(tmp_path: Path) -> None:
    argv = _run_entrypoint(
        tmp_path,
        ["driver", "--properties-file", "/opt/spark/conf/spark.properties", "--class", "Main", "local:///app.jar"],
        {"SPARK_DRIVER_BIND_ADDRESS": "10.88.0.5"},
    )
    assert argv == [
        "/opt/spark/bin/spark-submit",
        "--conf",
        "spark.driver.bindAddress=10.88.0.5",
        "--conf",
        "spark.executorEnv.SPARK_DRIVER_POD_IP=10.88.0.5",
        "--deploy-mode",
        "client",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "--class",
        "Main",
        "local:///app.jar",
    ]


def test_entrypoint_runs_any_other_command_as_given(tmp_path: Path) -> None:
    assert _run_entrypoint(tmp_path, ["printf", "%s\\n", "a b", "c"], {}) == ["a b", "c"]
