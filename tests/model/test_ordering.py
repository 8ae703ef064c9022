"""The reverse Cuthill-McKee order of mbsim.model.flat (the order S = J M^-1 J^T is factored in),
checked by what the order is for: the bandwidth and envelope it gives graphs whose best are known."""

from pathlib import Path

import numpy as np
import pytest

from mbsim.model.flat import reverse_cuthill_mckee


def _bandwidth(neighbours: list[list[int]], order: np.ndarray) -> int:
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    return max((abs(position[i] - position[j]) for i in range(len(neighbours)) for j in neighbours[i]), default=0)


def _scrambled(edges: list[tuple[int, int]], n: int, seed: int) -> list[list[int]]:
    """The graph of ``edges`` with its nodes renamed at random, each node listing itself too."""
    perm = np.random.default_rng(seed).permutation(n)
    neighbours = [{i} for i in range(n)]
    for a, b in edges:
        neighbours[perm[a]].add(int(perm[b]))
        neighbours[perm[b]].add(int(perm[a]))
    return [sorted(s) for s in neighbours]


@pytest.mark.parametrize("seed", range(5))
def test_a_scrambled_path_gets_bandwidth_one(seed):
    n = 60
    neighbours = _scrambled([(i, i + 1) for i in range(n - 1)], n, seed)
    order = reverse_cuthill_mckee(neighbours)
    assert sorted(order.tolist()) == list(range(n))
    assert _bandwidth(neighbours, order) == 1


@pytest.mark.parametrize("seed", range(5))
def test_a_scrambled_ladder_gets_bandwidth_two(seed):
    """A ladder (two rails and rungs, as a chain of four-bar loops): from an end, each BFS level
    holds the two nodes of one rung, so the best bandwidth 2 is found."""
    n = 40
    rails = [(2 * i, 2 * i + 2) for i in range(n - 1)] + [(2 * i + 1, 2 * i + 3) for i in range(n - 1)]
    rungs = [(2 * i, 2 * i + 1) for i in range(n)]
    neighbours = _scrambled(rails + rungs, 2 * n, seed)
    assert _bandwidth(neighbours, reverse_cuthill_mckee(neighbours)) == 2


def test_every_component_is_ordered():
    """Three components (a path, a triangle, a lone node): every node once, each component contiguous."""
    neighbours = [[0, 1], [0, 1, 2], [1, 2], [3, 4, 5], [3, 4, 5], [3, 4, 5], [6]]
    order = reverse_cuthill_mckee(neighbours).tolist()
    assert sorted(order) == list(range(7))
    for component in ({0, 1, 2}, {3, 4, 5}, {6}):
        places = sorted(order.index(i) for i in component)
        assert places == list(range(places[0], places[0] + len(component)))


def test_the_n_four_bar_rows_are_factored_in_a_narrow_envelope():
    """IFToMM A02, N = 40: the scene lists the ground hinges first, the couplers' after; in reverse
    Cuthill-McKee order S's envelope (entries below the diagonal from each row's first neighbour)
    is 757, the size scipy.sparse.csgraph's order gives (tests/solvers/test_compiled_step.py
    compares it with the scene's order), and the FlatModel takes that order."""
    from mbsim.model.compile import compile_model
    from mbsim.model.flat import flatten
    from mbsim.scene.spec import load_scene

    scene = Path(__file__).resolve().parents[2] / "mbsim" / "verify" / "problems" / "A02_n_four_bar" / "scene.yaml"
    flat = flatten(compile_model(load_scene(str(scene))))
    envelope = int(np.sum(np.arange(flat.nc) - np.asarray(flat.row_first)))
    assert envelope == 757
    assert not np.array_equal(flat.s_rows, np.arange(flat.nc))
