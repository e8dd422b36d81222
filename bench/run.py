"""Run every ``bench/bench_*.py`` module's ``main()`` in one process, one after another."""

from __future__ import annotations

import importlib.util
import pathlib
import sys


def main(argv: list[str]) -> int:
    here = pathlib.Path(__file__).parent
    wanted = set(argv)
    for path in sorted(here.glob("bench_*.py")):
        if wanted and path.stem.removeprefix("bench_") not in wanted:
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        print(f"\n=== {path.stem} ===", flush=True)
        module.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
