"""A build without FFmpeg (cmake -DHAMER_FFMPEG=OFF) still tracks hands
and runs them live from frames a program gives: the tracker lives in
src/track/, outside src/video/, and hamer_live reads any frame source.

The library alone is configured and built into a temporary folder (about
30 s on 2 cores); it must link none of FFmpeg's libraries, and
docs/library.md's live example (a frame source of its own, the detector,
the tracker and the regressor) must build against it and run; the video
functions must fail with HAMER_E_UNSUPPORTED and a line saying why.
Release pass only (tests/CMakeLists.txt): it builds a library of its own.
"""

import os
import shutil
import subprocess

import pytest

from conftest import REPO, checkpoint_path, describe
from detect.common import shared_images
from test_docs import RUN, blocks

pytestmark = pytest.mark.slow


def sh(cmd, cwd=None, env=None, timeout=600):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}\n" + describe(proc)
    return proc.stdout


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    b = tmp_path_factory.mktemp("noffmpeg") / "build"
    sh(["cmake", "-S", REPO, "-B", b, "-DCMAKE_BUILD_TYPE=Release", "-DHAMER_FFMPEG=OFF", "-DHAMER_TESTS=OFF"])
    sh(["cmake", "--build", b, "-j", str(os.cpu_count() or 2), "--target", "hamer_shared"])
    return b


def test_links_no_ffmpeg(lib):
    deps = sh(["ldd", lib / "libhamer.so"])
    assert not [ln for ln in deps.splitlines() if "libav" in ln or "libswscale" in ln], deps
    assert "libav" not in (lib / "hamer.pc").read_text()


def test_live_example_tracks_and_regresses(lib, tmp_path):
    (b,) = [b for b in blocks(REPO / "docs" / "library.md") if b.lang == "c" and RUN in b.marks
            and "hamer_live_run" in b.text]
    (tmp_path / "live.c").write_text(b.text)
    (tmp_path / "hamer.ckpt").symlink_to(checkpoint_path("d2h2"))
    (tmp_path / "photo.jpg").symlink_to(shared_images() / "hamer_example_5.jpg")
    sh([shutil.which("cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", REPO / "include", "-I", lib / "include",
        tmp_path / "live.c", "-o", tmp_path / "live", "-L", lib, "-lhamer", f"-Wl,-rpath,{lib}"])
    out = sh([tmp_path / "live"], cwd=tmp_path, env=dict(os.environ, HAMER_NO_CACHE="1"))
    lines = out.splitlines()
    assert lines[-1].startswith("10 frames, ") and " regressed" in lines[-1], out
    assert any(" 2 hands" in ln for ln in lines), out  # the photo's two hands, tracked


def test_video_says_unsupported(lib, tmp_path):
    src = tmp_path / "v.c"
    src.write_text(r'''
#include <hamer.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    hamer_frame_source s;
    int bad = hamer_video_open("x.mp4", NULL) != NULL || hamer_last_error_code() != HAMER_E_UNSUPPORTED ||
              !strstr(hamer_last_error(), "no FFmpeg") ||
              hamer_capture_open("/dev/video0", NULL, &s) != HAMER_E_UNSUPPORTED ||
              hamer_video_writer_open("x.mp4", 64, 64, 1, 30, 30) != NULL;
    printf("%s\n", hamer_last_error());
    return bad;
}
''')
    sh([shutil.which("cc"), "-std=c11", "-I", REPO / "include", "-I", lib / "include", src, "-o", tmp_path / "v",
        "-L", lib, "-lhamer", f"-Wl,-rpath,{lib}"])
    out = sh([tmp_path / "v"])
    assert "this build of hamer.c has no FFmpeg" in out
