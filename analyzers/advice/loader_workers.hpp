// What the data-loading rule knows of a run's DataLoader workers, from the dataloader_workers
// view: how many ran at once, how often they were started, the batches they fetched and what
// each cost them.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct LoaderWorkers {
  std::int64_t processes = 0;  // worker processes started over the run
  std::int64_t at_once = 0;    // the most alive at one time with one parent: num_workers
  // The most sets of them one parent started (its workers over at_once, rounded up): a loader
  // without persistent_workers starts a set every epoch. Per parent: ranks each start theirs.
  std::int64_t sets = 0;
  std::int64_t batches = 0;   // fetched, by all of them
  std::int64_t fetch_ns = 0;  // the time those fetches took, summed
  std::int64_t life_ns = 0;   // the workers' lives, summed (start to end or last flush)
  // The dataset is an IterableDataset: its fetches (workers' or the loop's own) resume a
  // generator, its __iter__, where a map-style one's call __getitem__.
  bool iterable = false;
  // Something of the program's own (its __iter__, a helper of it) asked
  // torch.utils.data.get_worker_info(): the stream is split among workers already.
  bool sharded = false;
  // The program's own collate_fn (a frame fetch() calls outside torch.utils.data that is
  // neither the dataset's __getitem__ nor its __iter__) and its share of the fetches' time:
  // the batch's work is there already, not per sample.
  std::string collate_fn;
  double collate_share = 0;
};

// `callers`: the breakdown's loader_callers, the frames that read the loop's loaders: where
// given, the workers a fork child's inherited stack shows started by a loader iterated from
// another frame (a validate() at each epoch's end) are left out, so a training loader of no
// workers is not told of the validation loader's (a red-team run was told
// "persistent_workers=True" for them, and ran slower).
LoaderWorkers load_loader_workers(const ProfileFile& file,
                                  const std::set<std::string>* callers = nullptr);

}  // namespace sonde::analyzers
