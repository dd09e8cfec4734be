"""`vam verify-api` VAP009: an abstract method an upstream base class gained between the
baseline and the target, which the plugin's class does not define (vLLM 0.16.0 made
`MLAAttentionImpl.forward_mha` abstract; vllm-ascend added it to its MLA impls)."""

from __future__ import annotations

from tests.verify_api.conftest import Tree
from tests.verify_api.test_va_own_usage import _check

OLD = """
    from abc import ABC, abstractmethod

    class AttentionImpl(ABC):
        @abstractmethod
        def forward(self, q): ...

    class MLAAttentionImpl(AttentionImpl):
        def forward_mqa(self, q):
            return q
"""

NEW = """
    from abc import ABC, abstractmethod

    class AttentionImpl(ABC):
        @abstractmethod
        def forward(self, q): ...

    class MLAAttentionImpl(AttentionImpl):
        @abstractmethod
        def forward_mha(self, q, k): ...

        @abstractmethod
        def forward_mqa(self, q): ...
"""


def test_an_abstract_method_gained_upstream_and_not_defined_is_reported(tree: Tree) -> None:
    found = _check(tree, OLD, NEW, {"plugin/mla.py": """
        from vllm.mod import MLAAttentionImpl

        class AscendMLAImpl(MLAAttentionImpl):
            def forward(self, q):
                return q
    """})
    # forward was abstract at both releases (and is defined); forward_mqa was concrete at
    # the baseline and is abstract now; forward_mha is new.
    assert found == [("plugin/mla.py", 3, "VAP009", "vllm.mod.MLAAttentionImpl.forward_mha"),
                     ("plugin/mla.py", 3, "VAP009", "vllm.mod.MLAAttentionImpl.forward_mqa")]


def test_defined_here_or_in_a_project_base_or_left_to_a_subclass_is_not(tree: Tree) -> None:
    found = _check(tree, OLD, NEW, {"plugin/mla.py": """
        from abc import ABC
        from vllm.mod import MLAAttentionImpl

        class Base(MLAAttentionImpl):
            def forward_mha(self, q, k):
                return q

        class Leaf(Base):
            def forward(self, q):
                return q

            forward_mqa = forward

        class Abstract(MLAAttentionImpl, ABC):
            pass
    """})
    assert found == []


def test_without_abc_abstract_methods_are_not_enforced(tree: Tree) -> None:
    plain = NEW.replace("(ABC)", "")
    found = _check(tree, OLD, plain, {"plugin/mla.py": """
        from vllm.mod import MLAAttentionImpl

        class AscendMLAImpl(MLAAttentionImpl):
            pass
    """})
    assert [f for f in found if f[2] == "VAP009"] == []
