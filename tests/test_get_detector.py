"""scripts/get_detector.sh: a real install (npm registry or npm's cache),
idempotence, repair, and its one-line errors (with a stand-in npm that
serves doctored packages)."""

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / 'scripts' / 'get_detector.sh'
HASHES = {
    'handedness.txt': '3b82f0246870fec456c8632d455a4e1d5648d2836a7a513a271781144f525916',
    'palm_detection_full.tflite': '2f25e740121983f68ffc05f99991d524dc0ea812134f6316a26125816941ee85',
    'palm_detection_lite.tflite': 'e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18',
    'hand_landmark_full.tflite': '8c026882c9ec059ce0f8e75266bee5a9a23c341a40e0000df755374d3d1b9b68',
    'hand_landmark_lite.tflite': 'd7fde8ac11f8ce03f8663775bfc323f4fc9f2a38062b4f4efa142874ef5b2a48',
}


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(['bash', str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=600, env=e)


def sha(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def one_line_error(r):
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    msg = r.stderr.strip()
    assert msg.startswith('get_detector.sh: ') and '\n' not in msg, msg
    return msg


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    if shutil.which('npm') is None:
        pytest.fail('npm not installed (scripts/deps.sh installs it)')
    d = tmp_path_factory.mktemp('det') / 'models'
    r = run(d)
    assert r.returncode == 0, r.stderr
    return d


def test_install(installed):
    assert sorted(p.name for p in installed.iterdir()) == sorted(HASHES)
    for name, h in HASHES.items():
        assert sha(installed / name) == h
    assert (installed / 'handedness.txt').read_bytes() == b'Left\nRight\n'


def test_idempotent_and_repair(installed):
    before = {p.name: p.stat().st_mtime_ns for p in installed.iterdir()}
    r = run(installed)
    assert r.returncode == 0 and 'already installed' in r.stdout
    assert before == {p.name: p.stat().st_mtime_ns for p in installed.iterdir()}
    (installed / 'palm_detection_lite.tflite').write_bytes(b'broken')
    r = run(installed)
    assert r.returncode == 0 and 'installed in' in r.stdout
    assert sha(installed / 'palm_detection_lite.tflite') == HASHES['palm_detection_lite.tflite']
    assert not [p for p in installed.iterdir() if p.name.startswith('.get_detector')]


def test_default_dir_from_xdg(tmp_path, installed):
    # with the files already there the default location is only checked
    xdg = tmp_path / 'xdg'
    shutil.copytree(installed, xdg / 'hamer' / 'detector')
    r = run(env={'XDG_DATA_HOME': str(xdg)})
    assert r.returncode == 0 and str(xdg / 'hamer' / 'detector') in r.stdout


def test_dir_is_a_file(tmp_path):
    f = tmp_path / 'file'
    f.write_text('x')
    one_line_error(run(f))


def fake_npm(tmp_path, loader_ranges, data):
    """A stand-in `npm` on PATH whose `pack` writes a doctored package."""
    pkg = tmp_path / 'pkgsrc'
    pkg.mkdir()
    files = ', '.join(f'{{"filename": "/third_party/mediapipe/modules/x/{n}", "start": {s}, "end": {e}}}'
                      for n, s, e in loader_ranges)
    members = {
        'package/hands_solution_packed_assets_loader.js': f'loadPackage({{"files": [{files}], "remote_package_size": {len(data)}}});'.encode(),
        'package/hands_solution_packed_assets.data': data,
        'package/hand_landmark_full.tflite': b'a',
        'package/hand_landmark_lite.tflite': b'b',
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w:gz') as t:
        for n, b in members.items():
            info = tarfile.TarInfo(n)
            info.size = len(b)
            t.addfile(info, io.BytesIO(b))
    tgz = pkg / 'mediapipe-hands-0.4.1675469240.tgz'
    tgz.write_bytes(buf.getvalue())
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    npm = bindir / 'npm'
    npm.write_text(f'#!/bin/sh\ncp "{tgz}" .\n')
    npm.chmod(0o755)
    return {'PATH': f'{bindir}:{os.environ["PATH"]}'}


def test_wrong_ranges(tmp_path):
    env = fake_npm(tmp_path, [('handedness.txt', 0, 11), ('palm_detection_full.tflite', 11, 99),
                              ('palm_detection_lite.tflite', 99, 200)], b'Left\nRight\n' + bytes(189))
    msg = one_line_error(run(tmp_path / 'out', env=env))
    assert 'palm_detection_full.tflite' in msg and 'expected [11 2341291)' in msg
    assert not any((tmp_path / 'out').glob('*.tflite'))


def test_hash_mismatch(tmp_path):
    env = fake_npm(tmp_path, [('handedness.txt', 0, 11), ('palm_detection_full.tflite', 11, 2341291),
                              ('palm_detection_lite.tflite', 2341291, 4326731)], b'Left\nRight\n' + bytes(4326720))
    msg = one_line_error(run(tmp_path / 'out', env=env))
    assert 'palm_detection_full.tflite: sha256 mismatch' in msg
    assert not any((tmp_path / 'out').glob('*.tflite'))


def test_npm_failure(tmp_path):
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    (bindir / 'npm').write_text('#!/bin/sh\necho "npm ERR! code ENOTFOUND" >&2\nexit 1\n')
    (bindir / 'npm').chmod(0o755)
    msg = one_line_error(run(tmp_path / 'out', env={'PATH': f'{bindir}:{os.environ["PATH"]}'}))
    assert 'npm pack' in msg and 'ENOTFOUND' in msg
