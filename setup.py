"""Build hook for the Cython extension; all metadata lives in setup.cfg."""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [
    Extension(
        "triemine.trie._trie",
        ["triemine/trie/_trie.pyx"],
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    )
]

setup(ext_modules=cythonize(extensions, language_level=3,
                            compiler_directives={"embedsignature": True}))
