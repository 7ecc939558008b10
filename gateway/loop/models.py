"""Which provider, and which of its models, a chat request's ``model`` names.

In this order:

    empty                    the default provider (``chat.provider``) with its configured model
    a provider's name        that provider with its configured model ("default")
    a configured model       the one provider configured with that model ("gpt-4o-mini"), as OpenAI clients send;
                             matched whole, so "meta-llama/Llama-3" is a model, not provider "meta-llama";
                             configured for several providers, it is ambiguous (400 naming them)
    <provider>/<model>       that provider with another model ("default/gpt-4o")

Anything else is ``UnknownModel`` (404 ``model_not_found``, as OpenAI answers). ``GET /v1/models`` lists the
provider names and the model names that select one provider: every name listed is accepted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import GatewayError
from .config import ProviderConfig
from .request import InvalidRequest


class UnknownModel(GatewayError):
    """No provider answers to the requested model."""

    status = 404
    param = "model"
    code = "model_not_found"  # OpenAI's code for a model that does not exist (openai.NotFoundError)


@dataclass(frozen=True)
class Choice:
    provider: str
    model: str


class ModelNames:
    """The names a request's ``model`` may take, over the configured providers."""

    def __init__(self, providers: Mapping[str, ProviderConfig], default: str | None):
        self.providers = providers
        self.default = default
        by_model: dict[str, list[str]] = defaultdict(list)
        for name, config in providers.items():
            by_model[config.model].append(name)
        self.by_model = {model: tuple(names) for model, names in by_model.items()}

    def resolve(self, model: str | None) -> Choice:
        if not model:
            if not self.default:
                raise InvalidRequest(f"Name a provider as 'model' (one of: {', '.join(self.providers)}).", "model",
                                     "missing_required_parameter")
            return self._choice(self.default)
        if model in self.providers:
            return self._choice(model)
        serving = self.by_model.get(model, ())
        if len(serving) == 1:
            return self._choice(serving[0])
        if serving:
            raise InvalidRequest(f"Model {model!r} is configured for providers {', '.join(map(repr, serving))}: "
                                 f"name one as 'model' ({' or '.join(serving)}) or as '<provider>/{model}'.", "model")
        name, slash, override = model.partition("/")
        if slash and override and name in self.providers:
            return Choice(name, override)
        raise UnknownModel(f"Unknown model {model!r}: use one of {', '.join(map(repr, self.accepted()))} "
                           "(GET /v1/models lists them), or '<provider>/<model>'.")

    def accepted(self) -> list[str]:
        """Every name ``resolve`` accepts besides the open-ended ``<provider>/<model>``: providers first."""
        unique_models = [model for model, names in self.by_model.items() if len(names) == 1]
        return [*self.providers, *(m for m in unique_models if m not in self.providers)]

    def listing(self) -> list[tuple[str, str]]:
        """``(accepted name, provider it selects)`` for each accepted name."""
        return [(name, self.resolve(name).provider) for name in self.accepted()]

    def _choice(self, provider: str) -> Choice:
        return Choice(provider, self.providers[provider].model)
