"""scripts/get_detector.sh: a real install (npm registry or npm's cache) of
the MediaPipe models and @vladmandic/human's hand-box detector,
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
    'pose_detection.tflite': 'a63c614bef30d35947f13be361820b1e4e3bec9cfeebf4d11216a18373108e85',
    'hand_recrop.tflite': '67d996ce96f9d36fe17d2693022c6da93168026ab2f028f9e2365398d8ac7d5d',
    'pose_landmark_full.tflite': 'e9a5c5cb17f736fafd4c2ec1da3b3d331d6edbe8a0d32395855aeb2cdfd64b9f',
    'pose_landmark_lite.tflite': 'f17bfbecadb61c3be1baa8b8d851cc6619c870a87167b32848ad20db306b9d61',
    'handtrack.json': 'a27d86daea1799c65dd0ad99ea1855a6b6dc721bf7ba4d4eb1a138c9e51d5755',
    'handtrack.bin': '70164f725aefbbf8094a8ef4150dc10e906b6f0976b484ef8ec882d3eae4b812',
}
HOLISTIC_RANGES = [('hand_recrop.tflite', 9464955, 9588747), ('pose_detection.tflite', 13915467, 16877755)]


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


def _tgz(path, members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w:gz') as t:
        for n, b in members.items():
            info = tarfile.TarInfo(n)
            info.size = len(b)
            t.addfile(info, io.BytesIO(b))
    path.write_bytes(buf.getvalue())


def _loader(ranges, size):
    files = ', '.join(f'{{"filename": "/third_party/mediapipe/modules/x/{n}", "start": {s}, "end": {e}}}'
                      for n, s, e in ranges)
    return f'loadPackage({{"files": [{files}], "remote_package_size": {size}}});'.encode()


def fake_npm(tmp_path, loader_ranges, data, holistic_ranges=None, holistic_data=None):
    """A stand-in `npm` on PATH whose `pack` writes doctored packages (the
    holistic one by default with its real ranges over zeros: wrong hashes)."""
    pkg = tmp_path / 'pkgsrc'
    pkg.mkdir()
    _tgz(pkg / 'mediapipe-hands-0.4.1675469240.tgz', {
        'package/hands_solution_packed_assets_loader.js': _loader(loader_ranges, len(data)),
        'package/hands_solution_packed_assets.data': data,
        'package/hand_landmark_full.tflite': b'a',
        'package/hand_landmark_lite.tflite': b'b',
    })
    hr = HOLISTIC_RANGES if holistic_ranges is None else holistic_ranges
    hd = bytes(max(e for _, _, e in hr)) if holistic_data is None else holistic_data
    _tgz(pkg / 'mediapipe-holistic-0.5.1675471629.tgz', {
        'package/holistic_solution_packed_assets_loader.js': _loader(hr, len(hd)),
        'package/holistic_solution_packed_assets.data': hd,
        'package/pose_landmark_full.tflite': b'c',
        'package/pose_landmark_lite.tflite': b'd',
    })
    _tgz(pkg / 'vladmandic-human-3.3.6.tgz', {
        'package/models/handtrack.json': b'{}',
        'package/models/handtrack.bin': b'e',
    })
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    npm = bindir / 'npm'
    npm.write_text(f'#!/bin/sh\nfor a; do spec="$a"; done\ncase "$spec" in\n'
                   f'  @mediapipe/hands@*) cp "{pkg}/mediapipe-hands-0.4.1675469240.tgz" . ;;\n'
                   f'  @mediapipe/holistic@*) cp "{pkg}/mediapipe-holistic-0.5.1675471629.tgz" . ;;\n'
                   f'  @vladmandic/human@*) cp "{pkg}/vladmandic-human-3.3.6.tgz" . ;;\n'
                   f'  *) echo "npm ERR! 404 $spec" >&2; exit 1 ;;\nesac\n')
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


HANDS_OK = [('handedness.txt', 0, 11), ('palm_detection_full.tflite', 11, 2341291),
            ('palm_detection_lite.tflite', 2341291, 4326731)]


def test_holistic_wrong_ranges(tmp_path):
    env = fake_npm(tmp_path, HANDS_OK, b'Left\nRight\n' + bytes(4326720),
                   holistic_ranges=[('hand_recrop.tflite', 9464955, 9588747), ('pose_detection.tflite', 1, 2)])
    msg = one_line_error(run(tmp_path / 'out', env=env))
    assert 'pose_detection.tflite' in msg and 'expected [13915467 16877755)' in msg
    assert not any((tmp_path / 'out').glob('*.tflite'))


def test_holistic_missing_range(tmp_path):
    env = fake_npm(tmp_path, HANDS_OK, b'Left\nRight\n' + bytes(4326720),
                   holistic_ranges=[('pose_detection.tflite', 13915467, 16877755)])
    msg = one_line_error(run(tmp_path / 'out', env=env))
    assert 'hand_recrop.tflite: the loader lists bytes [none)' in msg
    assert not any((tmp_path / 'out').glob('*.tflite'))


def test_holistic_npm_failure(tmp_path):
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    (bindir / 'npm').write_text('#!/bin/sh\nfor a; do spec="$a"; done\ncase "$spec" in\n'
                                '  @mediapipe/holistic@*) echo "npm ERR! code E404" >&2; exit 1 ;;\nesac\n'
                                'echo "npm ERR! unexpected" >&2; exit 1\n')
    (bindir / 'npm').chmod(0o755)
    msg = one_line_error(run(tmp_path / 'out', env={'PATH': f'{bindir}:{os.environ["PATH"]}'}))
    assert 'npm pack' in msg
