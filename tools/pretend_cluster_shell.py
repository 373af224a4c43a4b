#!/usr/bin/python3
"""The pretend cluster's remote shell (tools/pretend-cluster): a daemon per node and its client.

A process inside one node cannot enter another node's PID namespace (a sibling, not a child), so
an MPI launcher on node 0 reaches node 1 as it would on a real cluster: through a daemon that
already lives there. The client hands the daemon its own stdin, stdout and stderr (SCM_RIGHTS),
the command, its working directory and environment; the daemon starts the command in its node
and answers with the exit status. A signal to the client is passed on; a client that dies takes
its command with it (the daemon kills the command's process group), as rsh's would; a client
that ends after its command did leaves alone what the command left running (Open MPI starts its
orted with --daemonize: the orted's parent exits at once, and its child must survive the client).

  pretend_cluster_shell.py serve SOCKET        the node's PID 1: serves, and reaps every orphan
  pretend_cluster_shell.py run SOCKET ARGV...  runs ARGV on that node, exits with its status
"""

import json
import os
import signal
import socket
import struct
import sys
import threading

FDS = 3  # stdin, stdout, stderr


def send_message(sock, payload, fds=()):
    data = json.dumps(payload).encode()
    header = struct.pack("!I", len(data))
    if fds:
        socket.send_fds(sock, [header + data], list(fds))
    else:
        sock.sendall(header + data)


def receive_exactly(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def receive_message(sock, with_fds=False):
    fds = []
    if with_fds:
        data, fds, _, _ = socket.recv_fds(sock, 4, FDS)
        if len(data) < 4:
            data += receive_exactly(sock, 4 - len(data)) or b""
    else:
        data = receive_exactly(sock, 4)
    if not data or len(data) < 4:
        return None, fds
    (size,) = struct.unpack("!I", data[:4])
    body = receive_exactly(sock, size)
    return (json.loads(body) if body is not None else None), fds


class Daemon:
    """PID 1 of a node: one thread per client, one reaper for every child and orphan."""

    def __init__(self):
        self.lock = threading.Lock()
        self.statuses = {}  # pid -> wait status, for children a client still waits on
        self.waiting = set()
        self.changed = threading.Condition(self.lock)

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                threading.Event().wait(0.05)
                continue
            with self.lock:
                if pid in self.waiting:
                    self.statuses[pid] = status
                    self.changed.notify_all()

    def serve_client(self, conn):
        with conn:
            request, fds = receive_message(conn, with_fds=True)
            if request is None or len(fds) != FDS:
                for fd in fds:
                    os.close(fd)
                return
            actions = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(fds)]
            try:
                with self.lock:
                    pid = os.posix_spawnp(request["argv"][0], request["argv"], request["env"],
                                          file_actions=actions, setsid=True,
                                          setsigdef=[signal.SIGPIPE, signal.SIGTERM])
                    self.waiting.add(pid)
            except OSError as error:
                os.write(fds[2], f"pretend-cluster: {request['argv'][0]}: {error}\n".encode())
                send_message(conn, {"status": 127})
                return
            finally:
                for fd in fds:
                    os.close(fd)
            command_ended = threading.Event()
            threading.Thread(target=self.pass_signals, args=(conn, pid, command_ended),
                             daemon=True).start()
            with self.lock:
                while pid not in self.statuses:
                    self.changed.wait()
                status = self.statuses.pop(pid)
                self.waiting.discard(pid)
            command_ended.set()  # before the client hears of it, so its end kills nothing
            code = os.waitstatus_to_exitcode(status)
            try:
                send_message(conn, {"status": code if code >= 0 else 128 - code})
            except OSError:
                pass

    def pass_signals(self, conn, pid, command_ended):
        """Signals from the client go to the command's group; the client's end, while the
        command runs, a SIGKILL (a daemon it started may not have left the group yet)."""
        while True:
            try:
                message, _ = receive_message(conn)
            except OSError:
                message = None
            if message is None and command_ended.is_set():
                return
            if message is None:
                signal_number = signal.SIGKILL
            else:
                signal_number = message.get("signal", signal.SIGTERM)
            try:
                os.killpg(pid, signal_number)
            except (ProcessLookupError, PermissionError):
                return
            if message is None:
                return

    def serve(self, path):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        os.chmod(path, 0o600)
        listener.listen(64)
        threading.Thread(target=self.reap, daemon=True).start()
        with open(path + ".ready", "w"):
            pass
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=self.serve_client, args=(conn,), daemon=True).start()


def run(path, argv):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as error:
        print(f"pretend-cluster: cannot reach the node at {path}: {error}", file=sys.stderr)
        return 255
    # posix_spawn has no working directory: a shell changes to the client's first.
    argv = ["/bin/sh", "-c", 'cd "$0" 2> /dev/null; exec "$@"', os.getcwd()] + argv
    request = {"argv": argv, "env": dict(os.environ)}
    send_message(sock, request, fds=range(FDS))

    def pass_on(signal_number, _frame):
        try:
            send_message(sock, {"signal": signal_number})
        except OSError:
            pass

    for signal_number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signal_number, pass_on)
    answer, _ = receive_message(sock)
    return 255 if answer is None else answer["status"]


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        Daemon().serve(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "run":
        sys.exit(run(sys.argv[2], sys.argv[3:]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
