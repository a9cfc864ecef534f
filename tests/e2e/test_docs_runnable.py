#!/usr/bin/env python3
"""Runs the code blocks of README.md and docs/*.md marked runnable, as a newcomer would type them.

A block is runnable when the line before its fence is `<!-- runnable -->`. In it, lines that start
with `$ ` are commands (a trailing backslash continues one); the lines after a command, up to the
next, are what it prints: each must equal a line of its stdout or stderr, where `...` stands for
any text. A block without `$ ` lines is a script whose every line is a command. Every command must
exit 0. The blocks of one file run in order, in one fresh folder that is also $HOME, with the
built `tessera` first on PATH, so a later block may use what an earlier one wrote.

  test_docs_runnable.py TESSERA_BINARY SOURCE_DIR
"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

MARKER = "<!-- runnable -->"


def blocks(path):
    """(line number of the fence, [lines]) of each runnable block."""
    lines = path.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        if lines[i].strip() == MARKER:
            fence = i + 1
            if fence >= len(lines) or not lines[fence].startswith("```"):
                sys.exit(f"FAIL: {path}:{i + 1}: '{MARKER}' is not followed by a code fence")
            end = fence + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            if end == len(lines):
                sys.exit(f"FAIL: {path}:{fence + 1}: the runnable block is never closed")
            found.append((fence + 1, lines[fence + 1:end]))
            i = end
        i += 1
    return found


def steps(lines):
    """[(command, [expected output lines])] of a block."""
    prompted = any(line.startswith("$ ") for line in lines)
    result, pending = [], None
    for line in lines:
        if pending is not None:  # a continued command
            pending += "\n" + line
            if not line.endswith("\\"):
                result.append((pending, []))
                pending = None
            continue
        command = line[2:] if prompted and line.startswith("$ ") else (line if not prompted else None)
        if command is None:
            if not result:
                raise ValueError(f"output '{line}' before any command")
            if line.strip():
                result[-1][1].append(line)
            continue
        if not command.strip() or command.lstrip().startswith("#"):
            continue
        if command.endswith("\\"):
            pending = command
        else:
            result.append((command, []))
    return result


def matches(expected, output_lines):
    pattern = re.compile(".*".join(re.escape(part) for part in expected.split("...")))
    return any(pattern.fullmatch(line) for line in output_lines)


def main():
    tessera, source = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    files = [source / "README.md"] + sorted((source / "docs").glob("*.md"))
    commands = 0
    for path in files:
        runnable = blocks(path)
        if not runnable:
            continue
        with tempfile.TemporaryDirectory(prefix="tessera-docs-") as folder:
            env = dict(os.environ, HOME=folder, PATH=f"{tessera.parent}:{os.environ['PATH']}")
            env.pop("XDG_RUNTIME_DIR", None)  # the tool makes its own per-user folder
            for fence_line, lines in runnable:
                where = f"{path.relative_to(source)}:{fence_line}"
                try:
                    block_steps = steps(lines)
                except ValueError as error:
                    sys.exit(f"FAIL: {where}: {error}")
                for command, expected in block_steps:
                    run = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=folder, env=env,
                                         capture_output=True, text=True, timeout=600)
                    commands += 1
                    output = run.stdout.splitlines() + run.stderr.splitlines()
                    if run.returncode != 0:
                        sys.exit(f"FAIL: {where}: `{command}` exited {run.returncode}:\n{run.stdout}{run.stderr}")
                    for line in expected:
                        if not matches(line, output):
                            sys.exit(f"FAIL: {where}: `{command}` printed no line like\n  {line}\n"
                                     f"it printed:\n{run.stdout}{run.stderr}")
    if commands == 0:
        sys.exit("FAIL: no runnable block found: the marker or the docs changed")
    print(f"docs: {commands} runnable commands ran and printed what the docs show")
    print("PASS")


if __name__ == "__main__":
    main()
