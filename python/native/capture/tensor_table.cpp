#include "python/native/capture/tensor_table.h"

namespace cprr::python::capture {

std::string shape_text(const at::Tensor& t) {
  std::string out = "(";
  for (int64_t d = 0; d < t.dim(); ++d) {
    out += (d > 0 ? ", " : "") + std::to_string(t.size(d));
  }
  return out + (t.dim() == 1 ? ",)" : ")");
}

std::optional<int64_t> CaseMarks::placed(const TensorKey& key) {
  std::optional<int64_t> place = place_ ? place_(key.base) : std::nullopt;
  if (place) marks_[key] = std::nullopt;
  return place;
}

std::optional<uint32_t> CaseMarks::pop(const TensorKey& key) {
  auto it = marks_.find(key);
  if (it == marks_.end()) return std::nullopt;
  const std::optional<uint32_t> mark = it->second;
  marks_.erase(it);
  return mark;
}

void CaseMarks::registered(const at::Tensor& t, const TensorKey& key, int64_t place, int host,
                           const std::string& where) {
  if (marks_.count(key)) return;  // logged at its place already
  const uint64_t seq =
      sink_.library_op("host", "symm_mem.rendezvous at " + where, host, 0, {}, {}, false).first;
  const uint64_t size = storage_bytes(t);
  marks_[key] =
      sink_.track("symmetric memory (" + std::to_string(size) + " bytes) registered at " + where,
                  key.base, size, t.is_cuda(), 0, static_cast<int64_t>(seq), place);
}

Entry* TensorTable::get(const TensorKey& key) {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<Touch> TensorTable::touches(const std::vector<at::Tensor>& tensors) {
  std::vector<Touch> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    if (!trackable(t)) continue;
    const bool cpu = t.device().is_cpu();
    const TensorKey key = key_of(t);
    Entry* entry = get(key);
    const uint64_t offset = static_cast<uint64_t>(t.storage_offset() * t.element_size());
    const uint64_t span = extent(t);
    // Past a tracked host tensor's end: its memory went back unseen (host memory has no free
    // hook) and a bigger tensor made past the dispatcher has the address now.
    if (entry == nullptr || (entry->size && offset + span > *entry->size && cpu)) {
      entry = &found(t, key);
    }
    if (t.is_contiguous()) {
      out.emplace_back(entry->buffer, offset, span);
    } else {
      for (const auto& [o, n] : runs(t)) out.emplace_back(entry->buffer, o, n);
    }
  }
  return out;
}

Entry& TensorTable::found(const at::Tensor& t, const TensorKey& key) {
  const uint64_t size = storage_bytes(t);
  const std::string what = std::string(t.is_cuda() ? "cuda" : "cpu") + " tensor memory (" +
                           std::to_string(size) + " bytes) from before the case";
  const uint64_t seq =
      sink_
          .library_op("host", what + ", first used at " + where_(), order_.host(), 0, {}, {}, false)
          .first;
  return track_found(t, key, what, size, static_cast<int64_t>(seq));
}

Entry& TensorTable::track_found(const at::Tensor& t, const TensorKey& key, const std::string& what,
                                uint64_t size, int64_t seq) {
  const uint32_t buffer = sink_.track(what, key.base, size, t.is_cuda(), 0, seq, -1);
  Entry& e = entries_[key];
  e = Entry{buffer, order_.stream_of(t).first, {}, size};
  return e;
}

void TensorTable::track_made(const at::Tensor& t, const TensorKey& key, const std::string& label,
                             uint64_t handle, int64_t written_by, int stream) {
  const uint64_t size = extent(t) + static_cast<uint64_t>(t.storage_offset() * t.element_size());
  const std::optional<int64_t> place = marks_.placed(key);
  const uint32_t buffer =
      sink_.track(label, key.base, size, t.is_cuda(), handle, written_by, place.value_or(-1));
  Entry& e = entries_[key];
  e = Entry{buffer, stream, {}, std::nullopt};
  if (!t.is_cuda()) e.size = storage_bytes(t);
}

void TensorTable::track_unwritten(const at::Tensor& t, const std::string& label) {
  const TensorKey key = key_of(t);
  forget(key);
  const auto [stream, handle] = order_.stream_of(t);
  const uint64_t size = storage_bytes(t);
  const uint32_t buffer = sink_.track(label, key.base, size, t.is_cuda(), handle, -1, -1);
  entries_[key] = Entry{buffer, stream, {}, t.is_cuda() ? std::nullopt : std::optional(size)};
}

void TensorTable::adopt(const at::Tensor& t, uint32_t buffer) {
  entries_[key_of(t)] = Entry{buffer, order_.stream_of(t).first, {}, storage_bytes(t)};
}

void TensorTable::used_by(const std::vector<at::Tensor>& tensors, int stream) {
  for (const at::Tensor& t : tensors) {
    if (Entry* e = get(key_of(t))) e->used_on(stream);
  }
}

bool TensorTable::host_reused(const TensorKey& key) {
  Entry* e = get(key);
  if (e == nullptr || e->uses.empty()) return false;
  order_.reuse_after_uses(e->uses, e->stream);
  e->uses.clear();
  return true;
}

void TensorTable::forget(const TensorKey& key, bool reused) {
  auto it = entries_.find(key);
  const std::optional<uint32_t> mark = marks_.pop(key);
  if (it == entries_.end()) return;
  const Entry entry = std::move(it->second);
  entries_.erase(it);
  if (mark) sink_.untrack(*mark, entry.stream);
  if (reused) order_.reuse_after_uses(entry.uses, entry.stream);
  sink_.untrack(entry.buffer, entry.stream);
}

}  // namespace cprr::python::capture
