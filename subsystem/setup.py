"""The one thing `pyproject.toml` cannot declare without a warning: the CPU block copier's
compiled loop (`vllm_ascend/distributed/kv_transfer/utils/_block_memmove.c`, plain C on the
CPython API, no torch headers: it builds in about a second). `optional=True`: where it does not
compile, the install still succeeds and `block_copy_cpu` uses its pure Python fallback.
(`[tool.setuptools] ext-modules` in pyproject.toml is still marked experimental.)
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "vllm_ascend.distributed.kv_transfer.utils._block_memmove",
            sources=["vllm_ascend/distributed/kv_transfer/utils/_block_memmove.c"],
            optional=True,
        )
    ]
)
