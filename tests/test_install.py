"""`cmake --install` into a temporary prefix, then README.md's C example
built against the installed files through pkg-config and run: hamer.pc
must name the prefix the tree was installed to, for any --prefix given at
install time and after the tree is moved (hamer.pc is relocatable: its
prefix is ${pcfiledir}/../..).

Also: libhamer.a with what hamer.pc's Libs.private and Requires.private
list (pkg-config --static would add FFmpeg's own static-only libraries,
which Debian installs no .so links for, so those come from FFmpeg's
shared .pc files here).
"""

import os
import shutil
import subprocess

import pytest

from conftest import BUILD, SANITIZE, checkpoint_path, describe
from detect.common import shared_images
from test_docs import blocks, RUN, REPO

SAN = ["-fsanitize=address,undefined"] if SANITIZE else []


def readme_c_example():
    (b,) = [b for b in blocks(REPO / "README.md") if b.lang == "c" and RUN in b.marks]
    return b.text


def sh(cmd, **kw):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, **kw)
    assert proc.returncode == 0, f"{cmd}\n" + describe(proc)
    return proc.stdout


def pkg(prefix, *args):
    """pkg-config with the installed tree's hamer.pc first in the search."""
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    return subprocess.run(["pkg-config", *args, "hamer"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env)


def workdir(d):
    (d / "hamer.ckpt").symlink_to(checkpoint_path("d2h2"))
    (d / "photo.jpg").symlink_to(shared_images() / "hamer_example_5.jpg")


def build_and_run(src, d, flags, exe_name, env=None):
    exe = d / exe_name
    sh([shutil.which("cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", *SAN, str(src), "-o", str(exe), *flags])
    out = subprocess.run([str(exe)], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                         env=dict(os.environ, HAMER_NO_CACHE="1", **(env or {})))
    assert out.returncode == 0, describe(out)
    assert out.stdout.startswith("wrist at "), out.stdout
    return out.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("install") / "p1"
    sh(["cmake", "--install", str(BUILD), "--prefix", str(prefix)])
    return prefix


def test_pc_names_the_install_prefix(installed):
    pc = (installed / "lib" / "pkgconfig" / "hamer.pc").read_text()
    assert "/usr/local" not in pc, pc
    cflags = pkg(installed, "--cflags")
    libs = pkg(installed, "--libs")
    assert cflags.returncode == 0 and libs.returncode == 0, cflags.stderr + libs.stderr
    inc = [f[2:] for f in cflags.stdout.split() if f.startswith("-I")]
    libdir = [f[2:] for f in libs.stdout.split() if f.startswith("-L")]
    assert os.path.samefile(inc[0], installed / "include"), inc
    assert os.path.samefile(libdir[0], installed / "lib"), libdir
    assert "-lhamer" in libs.stdout.split()


def test_readme_example_through_pkg_config_and_moved(installed, tmp_path):
    """Built and run against the installed tree, then against the same tree
    moved elsewhere: hamer.pc follows it."""
    src = tmp_path / "example.c"
    src.write_text(readme_c_example())
    workdir(tmp_path)
    moved = tmp_path / "moved"
    shutil.copytree(installed, moved, symlinks=True)
    for prefix in (installed, moved):
        flags = pkg(prefix, "--cflags", "--libs")
        assert flags.returncode == 0, flags.stderr
        libdir = pkg(prefix, "--variable=libdir").stdout.strip()
        assert os.path.samefile(libdir, prefix / "lib")
        build_and_run(src, tmp_path, flags.stdout.split() + [f"-Wl,-rpath,{libdir}"], "example")
        ldd = sh(["ldd", str(tmp_path / "example")])
        (line,) = [ln for ln in ldd.splitlines() if "libhamer.so" in ln]
        assert os.path.samefile(line.split("=>")[1].split("(")[0].strip(), prefix / "lib" / "libhamer.so.0"), ldd


def test_static_library_with_private_libs(installed, tmp_path):
    src = tmp_path / "example.c"
    src.write_text(readme_c_example())
    workdir(tmp_path)
    static = tmp_path / "static"
    shutil.copytree(installed, static, symlinks=True)
    for so in (static / "lib").glob("libhamer.so*"):
        so.unlink()
    pc = (static / "lib" / "pkgconfig" / "hamer.pc").read_text().splitlines()
    private = next(line for line in pc if line.startswith("Libs.private:")).split(":", 1)[1].split()
    requires = next(line for line in pc if line.startswith("Requires.private:")).split(":", 1)[1].split()
    ffmpeg = sh(["pkg-config", "--libs", *requires]).split()
    flags = pkg(static, "--cflags", "--libs").stdout.split() + ffmpeg + private
    build_and_run(src, tmp_path, flags, "example_static")
    assert "libhamer" not in sh(["ldd", str(tmp_path / "example_static")])
