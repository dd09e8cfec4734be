"""`vam verify-api` and the shapes of upstream classes: VAP009, an abstract method an
upstream base class gained between the baseline and the target which the plugin's class does
not define (vLLM 0.16.0 made `MLAAttentionImpl.forward_mha` abstract; vllm-ascend added it to
its MLA impls); and a class built on a base the release makes at run time, whose attributes
are not judged."""

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


def test_an_attribute_of_a_class_built_on_a_generated_base_is_not_judged(tree: Tree) -> None:
    # vLLM 0.24.0: `class MinimaxM2ToolParser(MinimaxM2ParserToolAdapter)`, the base made by
    # a factory call; what the class offers cannot be listed statically.
    old = """
        class Parser:
            def __init__(self):
                self.prev_tool_call_arr = []

        class Other:
            def __init__(self):
                self.x = 1
    """
    new = """
        def make(name):
            return type(name, (), {})

        Adapter = make("Adapter")

        class Parser(Adapter):
            pass

        class Plain:
            pass

        class Other(Plain):
            pass
    """
    found = _check(tree, old, new, {"plugin/use.py": """
        from vllm.mod import Other, Parser

        def f(p: Parser, o: Other):
            a = p.prev_tool_call_arr
            b = o.x
            return a, b
    """})
    assert found == [("plugin/use.py", 5, "VAP008", "vllm.mod.Other.x")]


def test_a_generic_base_is_followed_to_its_class(tree: Tree) -> None:
    # vLLM 0.16.0: `class MLAAttentionImpl(AttentionImplBase[T], Generic[T])`, the ABC two
    # subscripted bases up; vllm-ascend's `AscendMLAImpl(MLAAttentionImpl[M])` likewise.
    generic = NEW.replace("from abc import ABC, abstractmethod",
                          "from abc import ABC, abstractmethod\n    from typing import Generic, "
                          "TypeVar\n    T = TypeVar('T')").replace(
        "class AttentionImpl(ABC):", "class AttentionImpl(ABC, Generic[T]):").replace(
        "class MLAAttentionImpl(AttentionImpl):", "class MLAAttentionImpl(AttentionImpl[T]):")
    found = _check(tree, OLD, generic, {"plugin/mla.py": """
        from vllm.mod import MLAAttentionImpl

        class AscendMLAImpl(MLAAttentionImpl[int]):
            def forward(self, q):
                return q
    """})
    assert [f[2:] for f in found] == [("VAP009", "vllm.mod.MLAAttentionImpl.forward_mha"),
                                      ("VAP009", "vllm.mod.MLAAttentionImpl.forward_mqa")]
