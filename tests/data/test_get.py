"""Fetching datasets (issue 39), offline: a loopback HTTP server (127.0.0.1 only) serves fixture archives."""

import hashlib
import http.server
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

from fewshot import data
from fewshot.data import downloads, fetch, get
from fewshot.errors import ConfigError, DataError, OutputError

from omniglot_fixtures import characters, write_background_zip

OMNIGLOT = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data" / "omniglot"


class Files(http.server.BaseHTTPRequestHandler):
  """Serves ``server.files`` with range requests; ``server.drop`` cuts the first response after that many bytes
  (every response, with ``server.again``), ``server.pause`` sleeps between blocks; every request is logged in ``server.seen``.
  """

  def do_GET(self):  # noqa: N802 (http.server's name)
    self.server.seen.append((self.path, self.headers.get("Range")))
    body = self.server.files.get(self.path)
    if body is None:
      self.send_error(404, "Not Found")
      return
    start = int(self.headers["Range"].split("=")[1].split("-")[0]) if self.headers.get("Range") else 0
    self.send_response(206 if start else 200)
    self.send_header("Content-Length", str(len(body) - start))
    self.end_headers()
    sent, drop = 0, self.server.drop
    for offset in range(start, len(body), 4096):
      block = body[offset:offset + 4096]
      if drop is not None and sent + len(block) > drop:
        self.server.drop = drop if self.server.again else None  # once (the next request goes through), or again
        self.wfile.write(block[: drop - sent])
        self.wfile.flush()
        self.connection.shutdown(2)
        return
      self.wfile.write(block)
      sent += len(block)
      time.sleep(self.server.pause)

  def log_message(self, *args):
    pass


@pytest.fixture
def server():
  httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
  httpd.files, httpd.seen, httpd.drop, httpd.again, httpd.pause = {}, [], None, False, 0.0
  threading.Thread(target=httpd.serve_forever, daemon=True).start()
  yield httpd
  httpd.shutdown()


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
  """A background zip in the release's layout, its bytes."""
  folder = write_background_zip(characters({"Latin": 4, "Greek": 4}, drawers=4), tmp_path_factory.mktemp("zip"),
                                "images_background")
  return (folder / "images_background.zip").read_bytes()


def _serve(server, monkeypatch, body: bytes, urls: tuple[str, ...] = ("/a.zip",), served: bytes | None = None):
  """The omniglot entry replaced by one file pinned to ``body``, served (as ``served``, if other bytes) at ``urls``."""
  for url in urls:
    server.files[url] = body if served is None else served
  base = f"http://127.0.0.1:{server.server_address[1]}"
  remote = downloads.Remote("images_background.zip", len(body), hashlib.sha256(body).hexdigest(),
                            tuple(u if u.startswith("http") else base + u for u in urls), "a test")
  monkeypatch.setitem(downloads.DATASETS, "omniglot", downloads.Dataset((remote,), "the test's manual route"))
  return remote


def test_a_good_download_is_verified_put_in_place_read_as_data_and_not_fetched_again(server, monkeypatch, archive,
                                                                                      tmp_path):
  _serve(server, monkeypatch, archive)
  [path] = get.get("omniglot", str(tmp_path / "d"), progress=False)
  assert pathlib.Path(path).read_bytes() == archive
  assert sorted(p.name for p in (tmp_path / "d").iterdir() if not p.name.startswith(".")) == ["images_background.zip"]
  splits = data.load_splits("omniglot", str(tmp_path / "d"), str(tmp_path / "tfds"))
  assert sum(s.num_classes for s in splits.values()) == 8  # --data_dir reads the folder as it is
  get.get("omniglot", str(tmp_path / "d"), progress=False)
  assert len(server.seen) == 1  # there and verified: not fetched again


def _lake_runs_zip(chars: dict) -> bytes:
  """A zip in ``all_runs.zip``'s layout (``all_runs/runNN/{training,test}/*.png``, ``class_labels.txt``), its PNGs
  characters' images copied again, as Lake's runs copy the evaluation alphabets'.
  """
  import io
  import zipfile

  pngs = [png for alphabet in chars.values() for drawings in alphabet.values() for png in drawings]
  buffer = io.BytesIO()
  with zipfile.ZipFile(buffer, "w") as zf:
    for run in (1, 2):
      for i in range(2):
        zf.writestr(f"all_runs/run{run:02d}/training/class{i + 1:02d}.png", pngs[2 * i])
        zf.writestr(f"all_runs/run{run:02d}/test/item{i + 1:02d}.png", pngs[2 * i + 1])
      zf.writestr(f"all_runs/run{run:02d}/class_labels.txt", "test/item01.png training/class01.png\n"
                  "test/item02.png training/class02.png\n")
  return buffer.getvalue()


def test_the_folder_data_get_writes_reads_as_its_image_zips_and_names_the_runs_zip_it_leaves_out(server, monkeypatch,
                                                                                                   archive, tmp_path):
  """Issue 56: all_runs.zip beside the image zips was read as 2 x 2 more classes (runNN/training, runNN/test)."""
  runs = _lake_runs_zip(characters({"Latin": 4}, drawers=4, seed=5))
  base = f"http://127.0.0.1:{server.server_address[1]}"
  server.files.update({"/images_background.zip": archive, "/all_runs.zip": runs})
  remotes = tuple(downloads.Remote(name, len(body), hashlib.sha256(body).hexdigest(), (f"{base}/{name}",), "a test")
                  for name, body in (("images_background.zip", archive), ("all_runs.zip", runs)))
  monkeypatch.setitem(downloads.DATASETS, "omniglot", downloads.Dataset(remotes, "the test's manual route"))
  get.get("omniglot", str(tmp_path / "d"), progress=False)
  assert sorted(p.name for p in (tmp_path / "d").iterdir() if not p.name.startswith(".")) == ["all_runs.zip",
                                                                                         "images_background.zip"]
  splits = data.load_splits("omniglot", str(tmp_path / "d"), str(tmp_path / "tfds"))
  names = [name for split in splits.values() for name in split.class_names]
  assert len(names) == 8 and not any(name.startswith("run") for name in names), names
  assert data.files("omniglot", str(tmp_path / "d")) == (["images_background.zip"], ["all_runs.zip"])
  from fewshot.training.provenance import data_record, describe_data

  record = data_record(splits, str(tmp_path / "d"), ["images_background.zip"], ["all_runs.zip"])
  line = describe_data("omniglot", record)
  assert record["not_read"] == ["all_runs.zip"] and "(not read: all_runs.zip, not its image files)" in line
  assert "8 classes" in line


def test_a_checksum_mismatch_leaves_nothing_where_the_reader_looks(server, monkeypatch, archive, tmp_path):
  _serve(server, monkeypatch, archive, served=archive[:-10] + b"0123456789")
  with pytest.raises(DataError) as raised:
    get.get("omniglot", str(tmp_path), progress=False)
  said = str(raised.value)
  assert "\n" not in said and f"expected {hashlib.sha256(archive).hexdigest()}" in said
  assert "get it by hand from the test's manual route" in said
  assert not (tmp_path / "images_background.zip").exists() and not list(tmp_path.glob(".*.part"))


def test_a_dropped_connection_resumes_with_a_range_request(server, monkeypatch, archive, tmp_path):
  _serve(server, monkeypatch, archive)
  server.drop = len(archive) // 3
  [path] = get.get("omniglot", str(tmp_path), progress=False)
  assert pathlib.Path(path).read_bytes() == archive
  assert server.seen[1][1] == f"bytes={len(archive) // 3}-"  # the second request asked for the rest only


def test_a_link_that_drops_every_few_blocks_still_finishes_and_an_offline_rerun_keeps_what_was_fetched(
    server, monkeypatch, archive, tmp_path):
  """Issue 56 item 5: only tries that add no bytes count against the retries, and a network failure keeps the
  ``.part`` for the next command (at 3900b17 each run fetched 3 drops' worth, then started again from byte 0).
  """
  remote = _serve(server, monkeypatch, archive)
  server.drop, server.again = len(archive) // 8, True
  [path] = get.get("omniglot", str(tmp_path / "flaky"), progress=False)
  assert pathlib.Path(path).read_bytes() == archive and len(server.seen) >= 8
  real = fetch._download

  def drops_then_the_network_is_gone(url, part, remote, bar):
    part.write_bytes(archive[:len(archive) // 3])
    raise ConnectionError("the connection closed")

  monkeypatch.setattr(fetch, "_download", drops_then_the_network_is_gone)
  with pytest.raises(DataError, match="resumed tries without a byte more"):
    get.get("omniglot", str(tmp_path / "offline"), progress=False)
  part = tmp_path / "offline" / ".images_background.zip.part"
  assert part.stat().st_size == len(archive) // 3
  monkeypatch.setattr(fetch, "_download", real)
  monkeypatch.setitem(downloads.DATASETS, "omniglot", downloads.Dataset(
      (downloads.Remote(remote.name, remote.size, remote.sha256, ("http://127.0.0.1:9/dead.zip",), "t"),), "by hand"))
  with pytest.raises(DataError) as raised:
    get.get("omniglot", str(tmp_path / "offline"), progress=False)
  assert f"the {len(archive) // 3:,} bytes fetched are kept" in str(raised.value)
  assert part.stat().st_size == len(archive) // 3
  monkeypatch.setitem(downloads.DATASETS, "omniglot", downloads.Dataset((remote,), "by hand"))
  server.drop, server.again = None, False
  assert pathlib.Path(get.get("omniglot", str(tmp_path / "offline"), progress=False)[0]).read_bytes() == archive
  assert server.seen[-1][1] == f"bytes={len(archive) // 3}-"


@pytest.mark.parametrize("damage", ["truncated", "one_byte"])
def test_a_bad_file_already_in_the_folder_is_named_and_moved_where_no_reader_looks(
    server, monkeypatch, archive, tmp_path, damage):
  """Offline, a wrong file at the target's name: the line says it failed verification and where it went."""
  bad = archive[:-100] if damage == "truncated" else archive[:50] + bytes([archive[50] ^ 1]) + archive[51:]
  (tmp_path / "images_background.zip").write_bytes(bad)
  remote = downloads.Remote("images_background.zip", len(archive), hashlib.sha256(archive).hexdigest(),
                            ("http://127.0.0.1:9/dead.zip",), "a test")
  monkeypatch.setitem(downloads.DATASETS, "omniglot", downloads.Dataset((remote,), "the manual route"))
  with pytest.raises(DataError) as raised:
    get.get("omniglot", str(tmp_path), progress=False)
  said = str(raised.value)
  wrong = f"{len(bad):,} bytes where {len(archive):,}" if damage == "truncated" else "sha256 "
  assert "\n" not in said and f"failed verification ({wrong}" in said and ".images_background.zip.failed" in said
  assert not (tmp_path / "images_background.zip").exists()
  assert (tmp_path / ".images_background.zip.failed").read_bytes() == bad


def test_a_dead_first_source_falls_back_to_the_second_and_a_404_is_named(server, monkeypatch, archive, tmp_path):
  _serve(server, monkeypatch, archive, urls=("http://127.0.0.1:9/dead.zip", "/a.zip"))
  assert pathlib.Path(get.get("omniglot", str(tmp_path / "ok"), progress=False)[0]).read_bytes() == archive
  remote = downloads.Remote("images_background.zip", 10, "0" * 64,
                            (f"http://127.0.0.1:{server.server_address[1]}/missing.zip",), "a test")
  monkeypatch.setitem(downloads.DATASETS, "omniglot", downloads.Dataset((remote,), "the manual route"))
  with pytest.raises(DataError, match=r"missing.zip: HTTP 404 .*get it by hand from the manual route"):
    get.get("omniglot", str(tmp_path / "gone"), progress=False)


def test_a_full_disk_is_one_line_and_the_rerun_resumes(server, monkeypatch, archive, tmp_path):
  _serve(server, monkeypatch, archive)
  real = fetch._download

  def fills_the_disk(url, part, remote, bar):
    part.write_bytes(archive[:1000])
    raise OSError(28, "No space left on device")

  monkeypatch.setattr(fetch, "_download", fills_the_disk)
  with pytest.raises(OutputError, match=r"no space left to fetch images_background.zip .* resumes from the 1,000 bytes"):
    get.get("omniglot", str(tmp_path), progress=False)
  monkeypatch.setattr(fetch, "_download", real)
  assert pathlib.Path(get.get("omniglot", str(tmp_path), progress=False)[0]).read_bytes() == archive
  assert server.seen[-1][1] == "bytes=1000-"


_CHILD = """
import hashlib, sys
from fewshot.data import downloads, get
body = open(sys.argv[1], "rb").read()
remote = downloads.Remote("images_background.zip", len(body), hashlib.sha256(body).hexdigest(), (sys.argv[2],), "t")
downloads.DATASETS["omniglot"] = downloads.Dataset((remote,), "the manual route")
print(get.get("omniglot", sys.argv[3], progress=True)[0])
"""


def _child(archive_file, url, to):
  return subprocess.Popen([sys.executable, "-c", _CHILD, str(archive_file), url, str(to)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def test_ctrl_c_mid_download_then_a_rerun_and_two_processes_into_one_folder(server, tmp_path):
  archive = os.urandom(400 * 1024)  # bytes only: what is checked here is the fetching
  (tmp_path / "a.zip").write_bytes(archive)
  server.files["/a.zip"] = archive
  server.pause = 0.05  # 100 blocks of 4 KiB: five seconds to stop it in
  url = f"http://127.0.0.1:{server.server_address[1]}/a.zip"
  child = _child(tmp_path / "a.zip", url, tmp_path / "d")
  part = tmp_path / "d" / ".images_background.zip.part"
  deadline = time.monotonic() + 60
  while not (part.exists() and part.stat().st_size > 16 * 1024) and time.monotonic() < deadline:
    time.sleep(0.02)
  child.send_signal(signal.SIGINT)
  child.communicate(timeout=60)
  assert not (tmp_path / "d" / "images_background.zip").exists() and part.exists()
  server.pause = 0.001
  both = [_child(tmp_path / "a.zip", url, tmp_path / "d") for _ in range(2)]
  outputs = [p.communicate(timeout=120) for p in both]
  assert [p.returncode for p in both] == [0, 0], outputs
  assert (tmp_path / "d" / "images_background.zip").read_bytes() == archive
  assert any("another process is fetching it" in err or "already there" in err for _, err in outputs)
  resumed = [r for path, r in server.seen if r]
  assert resumed and resumed[0].startswith("bytes=")  # the rerun went on from the bytes Ctrl-C left


def test_the_omniglot_pins_hold_for_the_official_background_small_archives():
  if not (OMNIGLOT / "images_background_small1.zip").exists():
    pytest.skip(f"the official background-small zips are not in {OMNIGLOT}")
  pinned = {f.name: f for f in downloads.DATASETS["omniglot"].files}
  for name in ("images_background_small1.zip", "images_background_small2.zip"):
    assert fetch.problem(OMNIGLOT / name, pinned[name]) is None
    md5 = hashlib.md5((OMNIGLOT / name).read_bytes()).hexdigest()
    assert md5[:8] in ("e704a628", "b75a71a5")  # the official archives' md5s, as the data's README records them


def test_bad_names_are_one_line_refusals(tmp_path):
  with pytest.raises(ConfigError, match="no dataset 'imagenet' to fetch; choose one of omniglot, cub"):
    get.get("imagenet", str(tmp_path))
  with pytest.raises(ConfigError, match="omniglot has no file 'x.zip'"):
    get.get("omniglot", str(tmp_path), only=["x.zip"])
  done = subprocess.run([sys.executable, "-m", "fewshot.data.get", "omniglot"], capture_output=True, text=True,
                        env={**os.environ, "NO_NETWORK": "1"})
  assert done.returncode == 2 and "--to DIR" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_missing_data_folder_names_the_command_that_fetches_it(tmp_path):
  from fewshot.config import Config  # noqa: PLC0415
  from fewshot.episodic.experiment import load_data  # noqa: PLC0415

  for dataset, fetched in (("omniglot", "omniglot"), ("cub", "cub"), ("cars196", "cars196"), ("sop", "sop"),
                           ("cifar_fs", "cifar100"), ("fc100", "cifar100")):
    with pytest.raises(DataError, match=f"python -m fewshot.data.get {fetched} --to DIR fetches it"):
      load_data(Config(dataset=dataset, data_dir=str(tmp_path / "absent"), tfds_dir=str(tmp_path / "tfds")))


def test_cifar100_is_checked_by_the_md5_its_page_publishes_and_reads_as_cifar_fs_and_fc100(server, monkeypatch,
                                                                                            tmp_path):
  import cifar_fixtures  # noqa: PLC0415

  from fewshot.data import readers  # noqa: PLC0415

  cifar_fixtures.write(tmp_path / "src")
  body = (tmp_path / "src" / "cifar-100-python.tar.gz").read_bytes()
  server.files["/cifar-100-python.tar.gz"] = body
  official = downloads.DATASETS["cifar100"].files[0]
  assert (official.size, official.check, official.md5) == (169_001_437, "md5", "eb9058c3a382ffc7106e4002c42a8d85")

  def pinned(md5: str):
    remote = downloads.Remote(official.name, len(body), None,
                              (f"http://127.0.0.1:{server.server_address[1]}/cifar-100-python.tar.gz",), "a test",
                              check="md5", md5=md5)
    monkeypatch.setitem(downloads.DATASETS, "cifar100", downloads.Dataset((remote,), "the test's manual route"))

  pinned("0" * 32)
  with pytest.raises(DataError, match=f"md5 {hashlib.md5(body).hexdigest()}, expected 0{{32}}"):
    get.get("cifar100", str(tmp_path / "bad"), progress=False)
  assert not (tmp_path / "bad" / official.name).exists()
  pinned(hashlib.md5(body).hexdigest())
  [path] = get.get("cifar100", str(tmp_path / "d"), progress=False)
  assert pathlib.Path(path).read_bytes() == body
  assert [readers.read(name, tmp_path / "d").num_classes for name in ("cifar_fs", "fc100")] == [100, 100]
  seen = len(server.seen)
  get.get("cifar100", str(tmp_path / "d"), progress=False)
  assert len(server.seen) == seen  # there and verified by its marker: not fetched again


def test_a_to_that_is_a_file_or_cannot_be_written_is_one_line_before_anything_is_fetched(tmp_path, monkeypatch):
  """Issue 56's tracebacks: --to a file, or a read-only or immutable folder, were 28-32 lines."""
  remote = downloads.Remote("images_background.zip", 10, "0" * 64, ("http://127.0.0.1:9/dead.zip",), "a test")
  monkeypatch.setitem(downloads.DATASETS, "omniglot", downloads.Dataset((remote,), "the manual route"))
  (tmp_path / "afile").write_text("")
  with pytest.raises(OutputError, match="is a file, not a folder"):
    get.get("omniglot", str(tmp_path / "afile"), progress=False)
  real = pathlib.Path.write_bytes

  def read_only(path, data):
    if path.name.startswith(".fewshot-write-test"):
      raise PermissionError(13, "Permission denied")
    return real(path, data)

  monkeypatch.setattr(pathlib.Path, "write_bytes", read_only)
  with pytest.raises(OutputError) as raised:
    get.get("omniglot", str(tmp_path / "ro"), progress=False)
  assert "cannot be written (Permission denied)" in str(raised.value) and "\n" not in str(raised.value)
