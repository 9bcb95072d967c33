// file:///abs/path: the regular files of a directory (or one file) on the machine that runs the
// job, as an object store would hold them (docs/sync.md): symlinks, empty directories and other
// entries are left out, hardlinks are separate files, each file keeps its permission bits.
#pragma once

#include <memory>
#include <string>

#include "bdn/sync/source.h"
#include "bdn/sync/source_uri.h"

namespace bdn::sync {

// The etag of a local file: "<size>-<mtime ns>-<inode>", which changes whenever the file is
// written or replaced.
Result<std::unique_ptr<Source>> OpenFileSource(const std::string& uri, const FileUri& parsed,
                                               const SourceOptions& options);

}  // namespace bdn::sync
