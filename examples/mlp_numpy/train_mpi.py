"""Data-parallel mlp_numpy over MPI ranks with mpi4py, as ChainerMN does: every rank draws the same
global batch, trains on its share of the rows, and the gradients are summed with Allreduce (each
rank's loss gradient already averages over the global batch), so every rank takes the step that
train.py takes for the same global batch and prints the same loss and accuracy to the printed
digits. Rank 0 prints. Options are train.py's.

    mpirun -np 2 python3 train_mpi.py --steps 20 --eval-every 5
"""
import sys
import time

import numpy
from mpi4py import MPI

import train


def shard(total, rank, ranks):
    return total * rank // ranks, total * (rank + 1) // ranks


def sum_over_ranks(comm, loss_sum, correct):
    out = numpy.empty(2)
    comm.Allreduce(numpy.array([loss_sum, correct], dtype=numpy.float64), out, op=MPI.SUM)
    return float(out[0]), int(out[1])


def allreduce_gradients(comm, model):
    for owner, name in model.params():
        grad = getattr(owner, "g" + name)
        comm.Allreduce(MPI.IN_PLACE, grad, op=MPI.SUM)


def main(argv=None):
    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()
    args = train.parse_args(argv)
    if args.mnist_dir is None:
        (train_x, train_y), (test_x, test_y) = train.make_synthetic(args.seed)
    else:
        (train_x, train_y), (test_x, test_y) = train.load_mnist(args.mnist_dir)
    if args.batch < ranks:
        if rank == 0:
            print("train_mpi.py: --batch %d is below %d ranks" % (args.batch, ranks),
                  file=sys.stderr)
        sys.exit(2)
    steps = args.epochs * (len(train_y) // args.batch) if args.epochs else args.steps
    lo, hi = shard(args.batch, rank, ranks)

    model = train.MLP(train.IMAGE_SIZE, args.hidden, train.CLASSES, train.Rng(args.seed))
    optimizer = train.Adam(model.params())
    sampler = train.BatchSampler(len(train_y), args.seed ^ 0x6A09E667F3BCC909)

    window_loss, window_correct, window_samples = 0.0, 0, 0
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        index = sampler.next(args.batch)[lo:hi]
        loss_sum, correct = model.forward(train_x[index], train_y[index], mean_over=args.batch)
        model.backward()
        allreduce_gradients(comm, model)
        optimizer.update()

        window_loss += loss_sum
        window_correct += correct
        window_samples += args.batch
        if args.eval_every and step % args.eval_every == 0:
            loss, hits = sum_over_ranks(comm, window_loss, window_correct)
            if rank == 0:
                print("step %d loss %.6f train_acc %.4f"
                      % (step, loss / window_samples, hits / window_samples), flush=True)
            window_loss, window_correct, window_samples = 0.0, 0, 0

    tlo, thi = shard(len(test_y), rank, ranks)
    test_loss, test_correct = train.evaluate(model, test_x[tlo:thi], test_y[tlo:thi], args.batch)
    test_loss, test_correct = sum_over_ranks(comm, test_loss, test_correct)
    seconds = time.perf_counter() - t0
    if rank == 0:
        print("final loss %.6f test_acc %.4f"
              % (test_loss / len(test_y), test_correct / len(test_y)), flush=True)
        print("time_s %.3f ranks %d" % (seconds, ranks), file=sys.stderr)


if __name__ == "__main__":
    main()
