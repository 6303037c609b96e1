"""Fashion-MNIST MLP in PyTorch at np=N, trained by python/examples/train_fmnist.py twice in
the same job: with PyTorch's gloo allreduce and with mpiddp.torch.allreduce_hook (same seed,
same data order). Both must reach >= 0.80 test accuracy after one epoch and agree within one
point. The data: Debian's dataset-fashion-mnist, read by mpiddp's C reader."""
import os
import sys

from ddptest import Check, need_torch

torch = need_torch()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python",
                                "examples"))
import mpiddp.datasets  # noqa: E402
import mpiddp.torch  # noqa: E402
import train_fmnist  # noqa: E402

MIN_ACC, MAX_GAP = 0.80, 0.01


def main():
    torch.set_num_threads(1)
    comm = mpiddp.torch.init_process_group()
    c = Check("python_fmnist", comm)
    data = (mpiddp.datasets.fashion_mnist(train=True), mpiddp.datasets.fashion_mnist(train=False))
    acc = {}
    for h in ("none", "allreduce"):
        acc[h], model = train_fmnist.train(h, epochs=1, data=data, log=c.log)
        # every rank holds the very same model (a hook that did not average would differ)
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        root = flat.clone()
        comm.broadcast(root, root=0)
        c.expect(torch.equal(flat, root), "%s: the trained models differ between ranks" % h)
    for h, a in acc.items():
        c.expect(a >= MIN_ACC, "%s: test accuracy %.4f < %.2f" % (h, a, MIN_ACC))
    c.expect(abs(acc["none"] - acc["allreduce"]) <= MAX_GAP, "accuracies differ by more than %.2f"
             % MAX_GAP)
    c.log("Fashion-MNIST MLP 784-512-256-10, 1 epoch, np=%d, batch 64 per rank: test accuracy "
          "gloo %.4f, mpiddp allreduce_hook %.4f" % (comm.size, acc["none"], acc["allreduce"]))
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
