#pragma once
#include <cstddef>
#include <string>

namespace c10 {
void* allocate(std::size_t bytes);
void release(void* ptr);
void log_message(const std::string& message);
std::string join(const std::string& a, const std::string& b);
}  // namespace c10
