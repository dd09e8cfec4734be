"""The VAP codes, those `vam verify-api` reports, each with its rule doc.

Constants naming them are in `migrator.verify_api.findings`. VAP0xx: errors (a use of the
upstream package that worked at the baseline release and fails at the target); VAP1xx:
warnings; VAP900: a file that could not be read as Python. Names an import takes that
are gone at the target are `vam verify-imports --against`'s (VAI001/VAI002), not repeated here.
"""

from __future__ import annotations

from migrator.core.codes.model import ERROR, WARNING, Code

_WHEN = ("Reported only when the project's code fits the baseline release (the installed one, "
         "or --from) and not the target; with no baseline, against the target alone.")
_CALLERS = ("Not reported when upstream calls the method on its own object (`self.m(...)`, "
            "`super().m(...)` in the upstream class and its bases) only from methods the "
            "project's class overrides too without calling up: upstream never calls the "
            "override. A method upstream never calls that way is reported (its callers are "
            "elsewhere). ")

VAP_CODES: tuple[Code, ...] = (
    Code(
        "VAP001", ERROR, "override does not accept a parameter the upstream method added",
        means=("A method of a class that subclasses an upstream class overrides an upstream "
               "method; at the target the upstream method takes a parameter the override does "
               "not (no parameter of that name or position, no *args/**kwargs). " + _CALLERS
               + _WHEN),
        why=("The upstream package calls the method with the new argument: TypeError "
             "`forward_oot() got an unexpected keyword argument`."),
        fix=("Add the parameter to the override (with the upstream default), or accept "
             "**kwargs and pass them on to super()."),
        bad="class AscendRMSNorm(RMSNorm):\n    def forward_oot(self, x, residual=None): ...",
        good=("class AscendRMSNorm(RMSNorm):\n"
              "    def forward_oot(self, x, residual=None, scale=None): ..."),
    ),
    Code(
        "VAP002", ERROR, "override requires a parameter the upstream method removed",
        means=("The override declares a parameter without a default that the upstream method "
               "no longer has at the target, so its callers no longer pass it. " + _CALLERS
               + _WHEN),
        why="Every upstream call of the method fails: TypeError, missing required argument.",
        fix="Drop the parameter from the override, or give it a default.",
        bad="def execute_model(self, scheduler_output, intermediate_tensors): ...",
        good="def execute_model(self, scheduler_output, intermediate_tensors=None): ...",
    ),
    Code(
        "VAP003", ERROR, "override still uses the old name of a renamed parameter",
        means=("The upstream method renamed a parameter at the target (same position, new "
               "name); the override keeps the old name. " + _CALLERS + _WHEN),
        why="Upstream callers that pass it by keyword fail with TypeError.",
        fix="Rename the override's parameter to the upstream name.",
        bad="def get_kv_cache_spec(self, layer): ...   # upstream now: (self, layer_name)",
        good="def get_kv_cache_spec(self, layer_name): ...",
    ),
    Code(
        "VAP004", ERROR, "override cannot take a parameter now keyword-only upstream",
        means=("A parameter the override takes by position under another name, or as "
               "positional-only, became keyword-only in the upstream method. " + _CALLERS
               + _WHEN),
        why="Upstream callers now pass it by keyword: TypeError.",
        fix="Name the override's parameter as upstream does (or make it keyword-only too).",
    ),
    Code(
        "VAP005", ERROR, "super() call the upstream method no longer accepts",
        means=("`super().method(...)` in an override passes a keyword, or a number of "
               "arguments, the upstream method does not take at the target, or leaves out a "
               "parameter it now requires. " + _WHEN),
        why="The call raises TypeError at the target.",
        fix="Pass what the upstream signature at the target takes (`vam verify-api` names it).",
        bad="super().__init__(vllm_config, device, is_driver_worker=True)",
        good="super().__init__(vllm_config, device)",
    ),
    Code(
        "VAP006", ERROR, "call passes an argument the upstream callable no longer takes",
        means=("A call of an upstream function or class (imported by name, or `module.f` "
               "through an imported module, or a method of an object of a known upstream "
               "class) passes a keyword the target's signature does not take, or more "
               "positional arguments than it has. Calls with *args/**kwargs are not checked. "
               + _WHEN),
        why="The call raises TypeError at the target.",
        fix="Pass the argument under its new name, or drop it (the message gives the "
            "target's signature).",
        bad="get_tensor_model_parallel_world_size(group=tp)",
        good="get_tensor_model_parallel_world_size()",
    ),
    Code(
        "VAP007", ERROR, "call leaves out a parameter the upstream callable now requires",
        means=("A call of an upstream function or class does not pass a parameter that has "
               "no default at the target (positional arguments counted). " + _WHEN),
        why="The call raises TypeError (missing required argument) at the target.",
        fix="Pass the new parameter (the message names it).",
    ),
    Code(
        "VAP008", ERROR, "attribute the upstream class or module no longer defines",
        means=("An attribute read from an object whose upstream class is known statically "
               "(a parameter or variable annotation, `x = UpstreamClass(...)`, a function's "
               "return annotation, `self` in a subclass of an upstream class, config fields "
               "along `vllm_config.model_config.x`) or from an upstream module, that the class "
               "(with its upstream bases: methods, class attributes, annotations, dataclass "
               "fields, `self.x` set anywhere) no longer defines at the target. A class with "
               "`__getattr__` is never reported; code under `hasattr(...)` or in a `try` "
               "catching AttributeError is not read. An attribute the project sets itself "
               "on objects of the class or a related one (`obj.x = ...`, `setattr(obj, \"x\", "
               "...)`, `Class.x = ...`, `self.x` in a project subclass) is not reported. "
               + _WHEN),
        why="The read raises AttributeError at the target; attributes often move between "
            "config classes.",
        fix="Read the attribute from where the target keeps it.",
        bad="vllm_config.scheduler_config.max_model_len",
        good="vllm_config.model_config.max_model_len",
    ),
    Code(
        "VAP009", ERROR, "subclass lacks a method the upstream class made abstract",
        means=("An upstream base class (one deriving from `abc.ABC`, or with the `ABCMeta` "
               "metaclass) declares at the target an `@abstractmethod` that it did not at the "
               "baseline, and neither the project's class nor its project bases define it. "
               "Reported on the project classes no other project class derives from, and not "
               "on a class that is abstract itself (derives from ABC)."),
        why=("Instantiating the class raises TypeError `Can't instantiate abstract class "
             "AscendMLAImpl with abstract method forward_mha`."),
        fix="Define the method in the subclass, with the upstream signature.",
        bad=("class AscendMLAImpl(MLAAttentionImpl):  # forward_mha is abstract at the "
             "target\n    def forward(self, *args): ..."),
        good=("class AscendMLAImpl(MLAAttentionImpl):\n"
              "    def forward(self, *args): ...\n"
              "    def forward_mha(self, q, kv_c_normed, k_pe, kv_cache, attn_metadata, k_scale, "
              "output): ..."),
    ),
    Code(
        "VAP100", WARNING, "method overrides one the upstream class no longer has",
        means=("A method of a subclass overrides an upstream method that existed at the "
               "baseline and is gone from the upstream class at the target (renamed or "
               "removed). A method the project's own code calls (`self.m(...)` in the class, "
               "a project base or subclass; `obj.m(...)` on an object typed as its upstream "
               "base) is the project's own API and is not reported."),
        why="Nothing calls the override any more: its behaviour silently stops applying.",
        fix="Override the method that replaced it, or delete the override.",
    ),
    Code(
        "VAP900", ERROR, "file could not be parsed",
        means=("A Python file below the paths given is not valid Python (or cannot be "
               "decoded), so none of its uses of the upstream package were checked."),
        why=("Importing the module raises SyntaxError; and a check that skipped it would "
             "pass without having read it."),
        fix=("Fix the syntax error at the position the message gives, or exclude the file "
             "(--exclude, [tool.vam] exclude) when it is not meant to be Python."),
    ),
)
