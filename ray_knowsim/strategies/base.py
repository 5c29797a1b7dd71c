"""What a tutor strategy is, and the registry that names them.

A strategy is the system prompt a tutor under test gets: a :class:`TutorStrategy` in
:data:`STRATEGIES` with its template (a name in the package's prompt manifest, or a
:class:`~ray_knowsim.prompts.templates.Template` a plugin builds itself) and how the offline test
double should teach under it. Run configs name strategies (``conditions: [{strategy: socratic}]``);
the name is checked against this registry, and nothing else branches on it. The prompts layer
renders the strategy it is handed (:func:`ray_knowsim.prompts.render.render_assistant`).

Every public module of this package is a built-in and registers itself with :func:`strategy`
when the registry is first asked for a name: a new built-in is one new module, with nothing else
to keep in step. Plugins register the same way from their own modules (``docs/extending.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from ray_knowsim.prompts.templates import Template, TemplateError, load_template
from ray_knowsim.registry import Registry, first_line

#: ``offline_reply(lesson, rng) -> str``: how the offline model teaches under this strategy; a
#: callable or a ``"module:function"`` path resolved on first use. ``lesson`` is the offline
#: model's reading of the chat (:class:`ray_knowsim.llm.offline.assistant.Lesson`).
OfflineReply = Callable[[Any, Any], str]


@lru_cache(maxsize=None)
def _first_template(names: tuple[str, ...], prompts: str | None) -> Template:
    """The first of ``names`` the prompt set has (resolved once: every assistant turn asks)."""
    error: TemplateError | None = None
    for name in names:
        try:
            return load_template(name, prompts)
        except TemplateError as exc:
            error = error or exc
    raise error or TemplateError("a tutor strategy names no template")


@dataclass(frozen=True)
class TutorStrategy:
    name: str
    template: str | Template  # manifest template name, or a plugin's own Template
    #: older template names tried when the chosen prompt set has no version of ``template``
    #: (the Simple tutor was ``assistant_minimal`` in prompt set v1)
    legacy_templates: tuple[str, ...] = ()
    offline_reply: OfflineReply | str | None = None  # None: the offline model's Simple reply
    aliases: tuple[str, ...] = field(default=())
    description: str = ""
    #: what the planner (``run --dry-run``, the estimate) assumes of this strategy's replies before a
    #: run has measured them: a typical chat model's completion tokens per reply, and the offline
    #: test double's in its own count (whitespace words, measured on the demo items). The defaults,
    #: for a strategy that names none, are the built-ins' means.
    reply_tokens: float = 442.5
    offline_reply_words: float = 91.5

    def template_for(self, prompts: str | None) -> Template:
        if isinstance(self.template, Template):
            return self.template
        return _first_template((self.template, *self.legacy_templates), prompts)

    def offline_path(self) -> str | None:
        """``"module:function"`` of the offline reply: handed to the offline test double in its
        out-of-band facts (it never imports this registry)."""
        fn = self.offline_reply
        if fn is None or isinstance(fn, str):
            return fn
        return f"{fn.__module__}:{fn.__qualname__}"


STRATEGIES: Registry[TutorStrategy] = Registry("tutor strategy", package="ray_knowsim.strategies")


def register_strategy(strategy: TutorStrategy, *, replace: bool = False) -> TutorStrategy:
    """Register a :class:`TutorStrategy` under its name and each alias (the decorator
    :func:`strategy` builds one from a declaration for you)."""
    for name in (strategy.name, *strategy.aliases):
        STRATEGIES.register(name, strategy, replace=replace)
    return strategy


def strategy(declaration: type | None = None, *, replace: bool = False) -> Any:
    """Register a strategy declared as a class: ``name`` and ``template`` (required),
    ``legacy_templates``, ``offline_reply``, ``aliases``, ``reply_tokens``, ``offline_reply_words`` as class attributes; the docstring's first
    line is the description. The module then holds the registered :class:`TutorStrategy` under
    the class's name. ``@strategy`` or ``@strategy(replace=True)``."""

    def register(cls: type) -> TutorStrategy:
        fields = {k: getattr(cls, k) for k in ("name", "template", "legacy_templates", "offline_reply", "aliases",
                                               "reply_tokens", "offline_reply_words") if k in vars(cls)}
        missing = {"name", "template"} - set(fields)
        if missing:
            raise TypeError(f"strategy {cls.__qualname__}: set {', '.join(sorted(missing))} as class attributes")
        fields["legacy_templates"] = tuple(fields.get("legacy_templates", ()))
        fields["aliases"] = tuple(fields.get("aliases", ()))
        return register_strategy(TutorStrategy(**fields, description=first_line(cls.__doc__)), replace=replace)

    return register(declaration) if declaration is not None else register


def get_strategy(name: str) -> TutorStrategy:
    return STRATEGIES.get(name)


__all__ = ["STRATEGIES", "OfflineReply", "TutorStrategy", "get_strategy", "register_strategy", "strategy"]
