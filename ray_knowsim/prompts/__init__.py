"""Prompt templates (versioned files pinned by ``templates/manifest.txt``) and their renderers.

Start at :mod:`ray_knowsim.prompts.render`: one pure function per role returning a ChatRequest.
"""
