"""The tutor of an episode is the policy being trained: a ChatModel whose answer comes from outside.

The simulation loop (:func:`ray_knowsim.sim.loop.run_session`) asks its assistant model for every
tutor reply through the same :class:`ChatModel` interface it asks the learner and the extractor.
An :class:`ExternalTutor` in the assistant's place turns that request into a hand-off: the loop's
request is published to the environment (it carries the benchmark's tutor prompt, which the
observation shows the policy), and the loop waits until the environment hands in the policy's
message. So an episode runs the benchmark's own loop (learner turn, extractor, state update,
stopping rules) unchanged; only where the tutor's words come from differs.
"""

from __future__ import annotations

import asyncio

from ray_knowsim.schema.chat import ChatRequest, ChatResponse


class ExternalTutor:
    """One episode's tutor: :meth:`generate` publishes the loop's request and waits for :meth:`reply`."""

    name = "external-tutor"

    def __init__(self) -> None:
        self.requests: asyncio.Queue[ChatRequest] = asyncio.Queue(maxsize=1)
        self._reply: asyncio.Future[str] | None = None

    async def generate(self, request: ChatRequest) -> ChatResponse:
        if self._reply is not None:
            raise RuntimeError("the loop asked the external tutor twice at once")
        self._reply = asyncio.get_running_loop().create_future()
        self.requests.put_nowait(request)
        try:
            text = await self._reply
        finally:
            self._reply = None
        # the policy's own tokens are the trainer's, not a simulation cost: no usage is charged
        return ChatResponse(text=text, finish_reason="stop")

    @property
    def waiting(self) -> bool:
        """The loop waits for a tutor message."""
        return self._reply is not None and not self._reply.done()

    def reply(self, text: str) -> None:
        if not self.waiting:
            raise RuntimeError("the loop is not waiting for a tutor message")
        assert self._reply is not None
        self._reply.set_result(text)


__all__ = ["ExternalTutor"]
