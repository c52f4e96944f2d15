"""torch-cluster's compiled operators checked against plain torch.

Its sdist ships no test folder (MANIFEST.in excludes test/), so these stand in for its suite:
knn, radius, nearest, grid_cluster and fps on the CPU, each against a reference written with
torch.cdist and friends. pytest file run by `python -m feedstock downstream`
(recipe/dependents.yaml: torch-cluster)."""
import torch
import torch_cluster

EXACT = "donot_use_mm_for_euclid_dist"  # cdist's matmul shortcut rounds differently near a radius


def points(n, dim=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(n, dim, generator=generator)


def pairs(edge_index):
    return sorted(zip(edge_index[0].tolist(), edge_index[1].tolist()))


def test_knn_is_the_k_smallest_distances():
    x, y = points(40), points(7, seed=1)
    got = torch_cluster.knn(x, y, 4)
    nearest = torch.cdist(y, x, compute_mode=EXACT).topk(4, largest=False).indices
    want = [(i, int(j)) for i in range(len(y)) for j in nearest[i]]
    assert pairs(got) == sorted(want)


def test_knn_respects_batches():
    x, y = points(20), points(6, seed=2)
    batch_x = torch.tensor([0] * 10 + [1] * 10)
    batch_y = torch.tensor([0] * 3 + [1] * 3)
    got = torch_cluster.knn(x, y, 2, batch_x, batch_y)
    assert all(batch_x[j] == batch_y[i] for i, j in pairs(got))


def test_radius_is_every_point_within_r():
    x, y = points(50), points(5, seed=3)
    got = torch_cluster.radius(x, y, 0.3, max_num_neighbors=50)
    close = (torch.cdist(y, x, compute_mode=EXACT) <= 0.3).nonzero().tolist()
    assert pairs(got) == sorted(map(tuple, close))


def test_nearest_is_the_argmin():
    x, y = points(30), points(4, seed=4)
    assert torch.equal(torch_cluster.nearest(x, y), torch.cdist(x, y, compute_mode=EXACT).argmin(dim=1))


def test_grid_cluster_is_the_voxel_index():
    pos = torch.tensor([[0.0, 0.0], [11.0, 9.0], [2.0, 8.0], [2.0, 2.0], [8.0, 3.0]])
    size = torch.tensor([5.0, 5.0])
    voxel = (pos / size).long()
    columns = int(pos[:, 0].max() // 5) + 1
    assert torch.equal(torch_cluster.grid_cluster(pos, size), voxel[:, 0] + voxel[:, 1] * columns)


def test_fps_takes_the_farthest_point_each_time():
    src = points(25, seed=5)
    got = torch_cluster.fps(src, ratio=0.2, random_start=False).tolist()
    want = [0]
    distance = torch.cdist(src, src[:1], compute_mode=EXACT).squeeze(1)
    while len(want) < len(got):
        want.append(int(distance.argmax()))
        distance = torch.minimum(distance, torch.cdist(src, src[want[-1]:want[-1] + 1], compute_mode=EXACT).squeeze(1))
    assert got == want
