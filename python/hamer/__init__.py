"""Python binding of hamer.c, the C implementation of the HaMeR hand-mesh
regressor.

    import hamer
    with hamer.Model("hamer.ckpt") as model:
        out = model.regress(crops)                  # dict of numpy arrays
        hands = model.predict("photo.jpg", [[x1, y1, x2, y2]], is_right=False)
        hands = model.predict("photo.jpg")          # the hands found by the built-in detector
        found = model.detect("photo.jpg")           # boxes, handedness, scores, landmarks

The shared library libhamer.so is loaded with ctypes on first use (no
compiler needed to install this package); ``hamer._lib`` documents where it
is looked for (``$HAMER_LIB`` first; a package installed by ``pip install
./python`` carries the library it was built with). Results are bit for bit
those of the ``hamer`` command line tool:

* ``Model.regress`` returns the arrays ``hamer regress`` writes to its .npz;
* ``Model.predict`` returns the ``"hands"`` list of ``hamer run``'s
  RESULT.json (built by the library's own JSON writer), with every list of
  numbers turned into a numpy array: float32 for the model's outputs, which
  are float32 in the library and exactly representable after the JSON round
  trip (9 significant digits), so they equal the CLI's numbers converted to
  float32.

Threads: a Model is safe to share between Python threads. Each concurrent
call gets its own inference state (activation buffers + worker threads) from
a small pool inside the Model, created on demand; the GIL is released while
the library computes (ctypes.CDLL releases it around every foreign call), so
calls from different threads run in parallel. With several calling threads,
lower ``threads`` (worker threads per state) accordingly.

Errors: everything the library rejects, and every bad array / box / option
given to this module, raises a ``HamerError`` with the library's one-line
message and ``HamerError.code``, the library's ``HAMER_E_*`` code. The
subclass says what kind of failure it is:

    HamerArgumentError     (also a ValueError)   E_ARG: a bad argument
    HamerFormatError       (also a ValueError)   E_FORMAT, E_SHAPE: a malformed file
    HamerIOError           (also an OSError)     E_IO: a file missing or unreadable
    HamerUnsupportedError  (also a RuntimeError) E_UNSUPPORTED, E_NOMANO: a valid
                                                 request this build, CPU or model cannot do
    HamerMemoryError       (also a MemoryError)  E_NOMEM

Wrong Python types (a path that is not a str / PathLike, ...) raise
TypeError as usual. The package is typed (PEP 561: inline annotations and
a ``py.typed`` marker). The implementation lives in private modules
(``_model``, ``_folder``, ``_lib``); this namespace holds only the names in
``__all__``.
"""

from ._lib import (CROP_H, CROP_W, E_ARG, E_CANCELLED, E_FORMAT, E_IO, E_NOMANO, E_NOMEM, E_SHAPE, E_UNSUPPORTED,
                   FOCAL, MAX_HANDS, N_FACES, N_KP, N_PARAMS, N_VERTS)
from ._model import (Detector, Hand, HamerArgumentError, HamerError, HamerFormatError, HamerIOError,
                     HamerMemoryError, HamerUnsupportedError, ImageLike, Model, library_path, library_version,
                     read_image, read_video, strerror, system_info, backends)
from ._version import __version__

__all__ = [
    "Model", "Detector", "HamerError", "HamerArgumentError", "HamerFormatError", "HamerIOError", "HamerUnsupportedError",
    "HamerMemoryError", "read_image", "read_video", "library_version", "library_path", "system_info", "backends", "strerror",
    "Hand", "ImageLike", "__version__",
    "CROP_H", "CROP_W", "N_VERTS", "N_FACES", "N_KP", "N_PARAMS", "FOCAL", "MAX_HANDS",
    "E_ARG", "E_IO", "E_FORMAT", "E_SHAPE", "E_NOMEM", "E_UNSUPPORTED", "E_NOMANO", "E_CANCELLED",
]

# Public classes and functions say they are hamer's (repr, tracebacks,
# pickled exceptions).
def _own():
    import types
    for name in __all__:
        obj = globals()[name]
        if isinstance(obj, (type, types.FunctionType)):
            obj.__module__ = __name__


_own()
del _own
