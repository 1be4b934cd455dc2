"""Where the test suite's CPU goes, by the kind of process that spent it (zygotes, jobs, kernels, pytest's workers).

`install` puts a `sitecustomize` into a virtual environment that, where PROF_LOG names a file, appends one JSON line
per Python process as it exits (also through `os._exit`, as zygotes and forked jobs leave): its argv, its own CPU
seconds and the test that started it (PYTEST_CURRENT_TEST, inherited). Without PROF_LOG it does nothing. `table`
sums the lines by kind of process and by test file; `uninstall` removes the hook.

    python benchmarks/suite_processes.py install .venv
    PROF_LOG=/tmp/procs.jsonl .venv/bin/python -m pytest -q
    python benchmarks/suite_processes.py table /tmp/procs.jsonl
    python benchmarks/suite_processes.py uninstall .venv
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

HOOK = '''import os
if os.environ.get("PROF_LOG"):  # benchmarks/suite_processes.py: one line per Python process at its exit
    import atexit, json, resource, sys
    def _log():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        try:
            with open(os.environ["PROF_LOG"], "a") as f:
                f.write(json.dumps({"argv": sys.argv[:4], "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                                    "test": os.environ.get("PYTEST_CURRENT_TEST", "")}) + "\\n")
        except OSError:
            pass
    atexit.register(_log)
    _exit = os._exit
    def _logged_exit(code, _exit=_exit):
        _log()
        _exit(code)
    os._exit = _logged_exit
'''


def kind(argv: list[str]) -> str:
    """The kind of process an argv names.

    >>> kind(["/x/colloc_kit/worker/zygote_process.py", "4"]), kind(["/x/worker/__main__.py", "--model", "smallcnn"])
    ('zygote', 'job (worker)')
    """
    names = [Path(arg).name for arg in argv]
    if not names:
        return "?"
    if names[0] == "zygote_process.py":
        return "zygote"
    if names[0] == "entry.py":
        return "lane"
    if names[0] == "__main__.py":  # python -m PACKAGE: named by its folder
        package = Path(argv[0]).parent.name
        return {"worker": "job (worker)", "cli": "colloc-kit's commands"}.get(package, package)
    if names[0] == "-c":
        return "python -c (pytest's workers, scripts)"
    return names[0]


def table(log: Path) -> str:
    """CPU seconds by kind of process, and the zygotes' by test file, as Markdown."""
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    by_kind: dict[str, list[float]] = collections.defaultdict(list)
    zygotes_by_file: dict[str, list[float]] = collections.defaultdict(list)
    for row in rows:
        by_kind[kind(row["argv"])].append(row["cpu_s"])
        if kind(row["argv"]) == "zygote":
            zygotes_by_file[row["test"].split("::")[0] or "(outside a test)"].append(row["cpu_s"])
    total = sum(map(sum, by_kind.values()))
    lines = [f"{len(rows)} processes, {total:,.0f} CPU seconds", "",
             "| kind | processes | CPU s | share | CPU s each |", "|---|---|---|---|---|"]
    for name, cpu in sorted(by_kind.items(), key=lambda item: -sum(item[1])):
        lines.append(f"| {name} | {len(cpu)} | {sum(cpu):,.0f} | {sum(cpu) / total:.0%} | {sum(cpu) / len(cpu):.2f} |")
    lines += ["", "| zygotes of | zygotes | CPU s |", "|---|---|---|"]
    for name, cpu in sorted(zygotes_by_file.items(), key=lambda item: -sum(item[1]))[:15]:
        lines.append(f"| {name} | {len(cpu)} | {sum(cpu):,.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["install", "uninstall", "table"])
    parser.add_argument("path", type=Path, help="the virtual environment (install, uninstall) or the log (table)")
    args = parser.parse_args(argv)
    if args.action == "table":
        print(table(args.path))
        return
    site = next(args.path.glob("lib/python3*/site-packages"), None)
    if site is None:
        parser.error(f"{args.path} is not a virtual environment (no lib/python3*/site-packages); give its folder")
    hook = site / "sitecustomize.py"
    if args.action == "install":
        hook.write_text(HOOK)
    else:
        hook.unlink(missing_ok=True)
    print(f"{args.action}ed {hook}")


if __name__ == "__main__":
    main()
