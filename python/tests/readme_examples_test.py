"""The README's Python examples (blocks marked "python readme-test"), run as
written against a real server, two ways: the package installed by
`pip install --no-build-isolation` and the package folder on PYTHONPATH (as the
bundle ships it). The only change to the text: the server's real port for
50051, since tests share the machine."""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from server import Server

ROOT = os.getcwd()  # the runfiles root (zerovec/)


def examples():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    blocks = re.findall(r"^```python readme-test\n(.*?)^```$", text, re.S | re.M)
    if len(blocks) != 3:
        raise AssertionError(f"expected 3 python readme-test blocks, found {len(blocks)}")
    return blocks


def pip_install(work):
    """Copies what `pip install ./python` reads from a checkout, then installs it."""
    src = os.path.join(work, "src")
    os.makedirs(os.path.join(src, "python"))
    shutil.copy(os.path.join(ROOT, "python", "setup.py"), os.path.join(src, "python"))
    for path in glob.glob(os.path.join(ROOT, "python", "zerovec", "**", "*.py"),
                          recursive=True):
        if "_pb2" in path:
            continue  # pip generates its own
        rel = os.path.relpath(path, ROOT)
        os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
        shutil.copy(path, os.path.join(src, rel))
    shutil.copytree(os.path.join(ROOT, "proto"), os.path.join(src, "proto"))
    shutil.copytree(os.path.join(ROOT, "models", "zerovec-mini"),
                    os.path.join(src, "models", "zerovec-mini"))
    target = os.path.join(work, "site")
    env = dict(os.environ, ZEROVEC_ATTACH_SO=os.path.join(ROOT, "python", "zerovec", "_attach.so"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                    "--no-deps", "--no-index", "--quiet", "--target", target,
                    os.path.join(src, "python")], check=True, env=env,
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return target


class ReadmeExamplesTest(unittest.TestCase):
    def run_examples(self, pythonpath, model_env):
        rag, shared, memory = examples()
        with Server() as server:
            port = server.address.rsplit(":", 1)[1]
            work = tempfile.mkdtemp(dir=server.tmp)
            os.symlink(server.data_dir, os.path.join(work, "data"))
            env = {k: v for k, v in os.environ.items() if k != "ZEROVEC_MODEL"}
            env["PYTHONPATH"] = pythonpath
            env.update(model_env)
            outputs = []
            for name, code in (("rag.py", rag), ("shared.py", shared),
                               ("memory.py", memory)):
                path = os.path.join(work, name)
                with open(path, "w") as f:
                    f.write(code.replace("127.0.0.1:50051", "127.0.0.1:" + port))
                r = subprocess.run([sys.executable, path], cwd=work, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, timeout=120)
                self.assertEqual(r.returncode, 0, r.stdout)
                outputs.append(r.stdout)
        rag_lines = outputs[0].splitlines()
        self.assertEqual(len(rag_lines), 2, outputs[0])
        self.assertRegex(rag_lines[0], r"^0\.\d+  tea: Green tea is steeped")
        readers = sorted(outputs[1].splitlines())
        self.assertEqual(readers, [f"reader {i}: 1000 rows, nearest to row 7: v7"
                                   for i in range(4)], outputs[1])
        memory_lines = outputs[2].splitlines()
        self.assertEqual(len(memory_lines), 2, outputs[2])
        for line in memory_lines:
            self.assertRegex(line, r"^-?\d\.\d{3} (m1|m2|m3|scratch): ")

    def test_through_pip_install(self):
        work = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        target = pip_install(work)
        self.assertTrue(os.path.exists(os.path.join(target, "zerovec", "v1", "zerovec_pb2.py")))
        self.assertTrue(os.path.exists(os.path.join(target, "zerovec", "_attach.so")))
        # No ZEROVEC_MODEL: the model installed beside the package is found.
        self.run_examples(target, {})

    def test_through_pythonpath(self):
        self.run_examples(os.path.join(ROOT, "python"),
                          {"ZEROVEC_MODEL": os.environ["ZEROVEC_MODEL"]})


if __name__ == "__main__":
    unittest.main(verbosity=2)
