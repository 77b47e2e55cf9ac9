"""Starts a real `zerovec serve` on 127.0.0.1 for the Python tests.

The binary and model come from the environment run_py_test.sh sets
(ZEROVEC_BIN, ZEROVEC_MODEL). The port is the kernel's pick (--listen
127.0.0.1:0 --port-file), so tests never collide.
"""

import os
import subprocess
import tempfile
import time


class Server:
    def __init__(self, data_dir=None, token=None, model=True, extra_args=()):
        self.tmp = tempfile.mkdtemp(prefix="zv_py_", dir=os.environ.get("TEST_TMPDIR"))
        self.data_dir = data_dir or os.path.join(self.tmp, "data")
        self.token = token
        args = [os.environ["ZEROVEC_BIN"], "serve", "--data", self.data_dir,
                "--listen", "127.0.0.1:0", "--port-file",
                os.path.join(self.tmp, "port"),
                "--model", os.environ["ZEROVEC_MODEL"] if model else "none"]
        if token:
            path = os.path.join(self.tmp, "token")
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(token + "\n")
            args += ["--auth-token-file", path]
        args += list(extra_args)
        self.log = open(os.path.join(self.tmp, "serve.log"), "w+")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.address = self._wait_for_port(os.path.join(self.tmp, "port"))

    def _wait_for_port(self, path, seconds=60):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"zerovec serve exited {self.proc.returncode}: "
                                   f"{self.read_log()}")
            if os.path.exists(path) and os.path.getsize(path) > 0:
                with open(path) as f:
                    return f"127.0.0.1:{f.read().strip()}"
            time.sleep(0.05)
        raise RuntimeError("zerovec serve did not write its port: " + self.read_log())

    def read_log(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
