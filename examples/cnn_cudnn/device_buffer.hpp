// Device memory owned like a std::vector: allocated once, freed on scope exit, copied explicitly.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "gpu_check.hpp"

namespace cnn {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    GPU_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(float)));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : data_(o.data_), count_(o.count_) {
    o.data_ = nullptr;
    o.count_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(count_, o.count_);
    return *this;
  }
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);
  }

  float* get() const { return data_; }
  std::size_t size() const { return count_; }

  void upload(const float* host, std::size_t count) {
    GPU_CHECK(cudaMemcpy(data_, host, count * sizeof(float), cudaMemcpyHostToDevice));
  }
  void upload(const std::vector<float>& host) { upload(host.data(), host.size()); }
  void download(float* host, std::size_t count) const {
    GPU_CHECK(cudaMemcpy(host, data_, count * sizeof(float), cudaMemcpyDeviceToHost));
  }
  void zero() { GPU_CHECK(cudaMemset(data_, 0, count_ * sizeof(float))); }

 private:
  float* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace cnn
