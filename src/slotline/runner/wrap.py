"""The exit-code keeper: runs one command, caps its log, writes its exit status to a file.

Started by the process runner as
`python -I -S wrap.py EXIT_FILE MEMORY_MB CWD LOG_MAX_BYTES -- ARGV...` in its own session,
with stdout (and stderr) appended to the attempt's log file. It survives the node that
started it, so a restarted node can collect the exit status of an agent it re-adopted; it
ignores SIGTERM/SIGINT/SIGHUP (they reach the command through the process group); and it
imports nothing beyond the standard library core, to start fast.
"""

# `_signal`, not `signal`: the latter imports enum, which costs ~6 ms at every start.
import _signal as signal  # type: ignore[import-not-found]
import os
import select
import sys

CHUNK = 65536


def _write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    # Atomic against a crash of any process (rename); no fsync: a machine crash ends the
    # command too, so there would be nothing left to collect.
    with open(tmp, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def _start(command: list[str], memory_mb: str, out: int) -> int:
    pid = os.fork()
    if pid == 0:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        try:
            if memory_mb != "0":
                import resource

                limit = int(memory_mb) * 1024 * 1024
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            os.execvp(command[0], command)  # noqa: S606 - an argv list, no shell
        except OSError as exc:
            os.write(2, f"slotline: cannot start {command[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    return pid


def _pump(source: int, pid: int, cap: int) -> int:
    """Copy the command's output to our stdout (the log) up to `cap` bytes, draining the
    rest so the command never blocks on a full pipe. Returns the wait status."""
    written = dropped = 0
    status = None
    while True:
        ready, _, _ = select.select([source], [], [], 0.2)
        if not ready:
            # Quiet for a moment: if the command has exited, background children it left
            # holding the pipe open must not keep the attempt alive.
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                status = wait_status
                break
            continue
        data = os.read(source, CHUNK)
        if not data:
            break
        room = max(0, cap - written)
        if room:
            os.write(1, data[:room])
            written += min(room, len(data))
            if len(data) > room:
                marker = f"\n[slotline: log cap of {cap} bytes reached; the rest is dropped]\n"
                os.write(1, marker.encode())
        dropped += max(0, len(data) - room)
    if status is None:
        _, status = os.waitpid(pid, 0)
    if dropped:
        os.write(1, f"[slotline: {dropped} bytes of output dropped]\n".encode())
    return status


def main(argv: list[str]) -> int:
    exit_file, memory_mb, cwd, log_max, sep, *command = argv
    if sep != "--" or not command:
        sys.stderr.write("usage: wrap.py EXIT_FILE MEMORY_MB CWD LOG_MAX_BYTES -- ARGV...\n")
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
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    read_end, write_end = os.pipe()
    pid = _start(command, memory_mb, write_end)
    os.close(write_end)
    status = _pump(read_end, pid, int(log_max))
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    _write(exit_file, f"{code}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
