"""The card of the page: MIG profiles a page plans with come from the GPU it runs on where the kit knows that GPU's
MIG table, and the page says which card it plans for otherwise."""

from colloc_kit import machine
from colloc_kit.notebook import setup


def described(*names):
    return lambda: {"gpus": [{"name": n, "memory_mb": 1} for n in names], "host": {}}


def test_a_page_on_an_h200_plans_with_the_h200s_profiles(monkeypatch):
    monkeypatch.setattr(machine, "describe", described("NVIDIA H200"))
    shape, said = setup.planning_card("H100-80GB")
    assert shape.name == "H200-141GB" and said == "MIG planned on H200-141GB, the GPU this page ran on"
    assert {p.name for p in shape.profiles} >= {"1g.18gb", "7g.141gb"}


def test_a_page_without_a_known_card_says_which_built_in_table_it_plans_with(monkeypatch):
    monkeypatch.setattr(machine, "describe", described())
    shape, said = setup.planning_card("H100-80GB")
    assert shape.name == "H100-80GB" and said == "MIG planned on H100-80GB (a built-in table: this machine has no GPU)"
    monkeypatch.setattr(machine, "describe", described("NVIDIA GeForce RTX 4090"))
    assert setup.planning_card("A100-40GB")[1] == ("MIG planned on A100-40GB (a built-in table: this machine's "
                                                   "NVIDIA GeForce RTX 4090 has no MIG table in the kit)")


def test_the_tour_says_the_cards_modes_in_words_not_nvmls_numbers():
    said = machine.in_words({"name": "NVIDIA H200", "mig_mode": {"current": 0, "pending": 0}, "compute_mode": 0})
    assert (said["mig_mode"], said["compute_mode"]) == ("disabled", "default (shared)")
    assert machine.in_words({"mig_mode": {"current": 1, "pending": 1}, "compute_mode": 3})["mig_mode"] == "enabled"
