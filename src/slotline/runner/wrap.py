"""The exit-code keeper: runs one command and writes its exit status to a file.

Started by the process runner as `python -I -S wrap.py EXIT_FILE MEMORY_MB CWD -- ARGV...` in
its own session. It survives the node that started it (so a restarted node can collect
the exit code of an agent it re-adopted), ignores SIGTERM/SIGINT itself (they reach the
command through the process group) and imports nothing but the standard library core.
"""

import os
import signal
import sys


def _write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    exit_file, memory_mb, cwd, sep, *command = argv
    if sep != "--" or not command:
        sys.stderr.write("usage: wrap.py EXIT_FILE MEMORY_MB CWD -- ARGV...\n")
        return 2
    # The pid file lets a node that crashed between spawning and recording the pid
    # still find (and re-adopt) this run.
    _write(exit_file.removesuffix(".exit") + ".pid", f"{os.getpid()}\n")
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as exc:
            sys.stderr.write(f"slotline: cannot enter workspace {cwd}: {exc.strerror}\n")
            _write(exit_file, "127\n")
            return 0
    # Ignore stop signals before forking so no window leaves the keeper killable; the
    # command gets the default dispositions back before exec.
    stops = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    for sig in stops:
        signal.signal(sig, signal.SIG_IGN)
    pid = os.fork()
    if pid == 0:
        for sig in stops:
            signal.signal(sig, signal.SIG_DFL)
        try:
            if memory_mb != "0":
                import resource

                limit = int(memory_mb) * 1024 * 1024
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            os.execvp(command[0], command)  # noqa: S606 - an argv list, no shell
        except OSError as exc:
            sys.stderr.write(f"slotline: cannot start {command[0]}: {exc.strerror}\n")
        os._exit(127)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    _write(exit_file, f"{code}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
