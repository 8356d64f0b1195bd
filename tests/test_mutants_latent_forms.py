"""How ``fathom.prompts.latent_forms.Forms.draw`` uses its random stream: a choice of one draws
nothing (so the default forms leave every needle after them as it always was), and a choice of two
draws either."""

from __future__ import annotations

import random

from fathom.prompts.latent_forms import DEFAULT_FORMS, Form, Forms


def test_the_default_forms_take_nothing_from_the_random_stream() -> None:
    rng = random.Random(7)
    before = rng.getstate()
    assert DEFAULT_FORMS.draw(rng, "landmark") == Form("visit", "name-first", 1)
    assert rng.getstate() == before


def test_each_of_two_options_is_drawn_and_a_single_one_draws_nothing() -> None:
    forms = Forms(relations=("visit", "home"), orders=("name-first",), templates=(1, 2))
    drawn = {forms.draw(random.Random(seed), "landmark") for seed in range(40)}
    assert {(form.relation, form.template) for form in drawn} == {
        ("visit", 1),
        ("visit", 2),
        ("home", 1),
        ("home", 2),
    }
    assert {form.order for form in drawn} == {"name-first"}
    # An artwork takes only "visit": a relation of one, drawn from nothing; the template still drawn.
    rng, replay = random.Random(3), random.Random(3)
    assert forms.draw(rng, "artwork") == Form("visit", "name-first", replay.choice((1, 2)))
    assert rng.getstate() == replay.getstate()
