"""``python -m sparkop.api crds [DIR]`` and ``python -m sparkop.api validate FILE...`` (wired by the lead as
``sparkop crds`` / ``sparkop validate``)."""

from __future__ import annotations

import sys

from . import crds, validate

USAGE = "usage: python -m sparkop.api {crds [DIR] [--check] | validate FILE...}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] == "crds":
        rest = args[1:]
        check = "--check" in rest
        dirs = [a for a in rest if a != "--check"]
        return crds.main(dirs[0] if dirs else crds.CRD_DIR, check=check)
    if args[0] == "validate":
        return validate.main(args[1:])
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
