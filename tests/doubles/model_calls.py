"""A model's answers to a list of requests, from synchronous test code (the model closed after)."""

from __future__ import annotations

import asyncio

from ray_knowsim.llm.http.client import OpenAICompatibleModel
from ray_knowsim.llm.protocol import generate_all


def run(model: OpenAICompatibleModel, requests):
    async def main():
        try:
            return await generate_all(model, requests)
        finally:
            await model.aclose()

    return asyncio.run(main())
