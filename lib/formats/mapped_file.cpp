#include "formats/mapped_file.h"

#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/memory_pages.h"

namespace parla::formats {

// The live mappings the SIGBUS handler answers for, in a fixed table it reads without locks (a handler may not
// lock or allocate). A fault inside one of them is a page past the file's new end: the handler maps a zero page
// there (mmap is a system call, safe in a handler), marks the file changed and returns, so the read goes on and
// the loader refuses the file afterwards. Any other SIGBUS goes to the handler that was there before, or kills
// the process as it would have.
struct MappingGuard {
  static constexpr int kSlots = 256;
  static std::array<std::atomic<const MappedFile*>, kSlots> slots;
  static struct sigaction previous;
  static uintptr_t page;

  static void on_sigbus(int sig, siginfo_t* info, void* context) {
    const auto at = reinterpret_cast<uintptr_t>(info->si_addr);
    for (auto& slot : slots) {
      const MappedFile* f = slot.load(std::memory_order_acquire);
      if (!f || at < reinterpret_cast<uintptr_t>(f->data_) || at - reinterpret_cast<uintptr_t>(f->data_) >= f->size_)
        continue;
      void* p = ::mmap(reinterpret_cast<void*>(at & ~(page - 1)), page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      if (p == MAP_FAILED) break;
      f->changed_.store(true, std::memory_order_release);
      return;
    }
    if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction) {
      previous.sa_sigaction(sig, info, context);
    } else if (!(previous.sa_flags & SA_SIGINFO) && previous.sa_handler != SIG_DFL &&
               previous.sa_handler != SIG_IGN) {
      previous.sa_handler(sig);
    } else {
      ::signal(sig, SIG_DFL);  // the fault repeats on return, now with the default action
      if (info->si_code <= 0) ::raise(sig);  // sent, not a fault: deliver it again
    }
  }

  // (Re)installs the handler where another (a test framework's, restored after each test) replaced it.
  static void install() {
    static std::once_flag once;
    std::call_once(once, [] { page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE)); });
    struct sigaction now {};
    if (::sigaction(SIGBUS, nullptr, &now) != 0) return;
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == &on_sigbus) return;
    struct sigaction ours {};
    ours.sa_sigaction = &on_sigbus;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    previous = now;
    ::sigaction(SIGBUS, &ours, nullptr);
  }

  static int add(const MappedFile* f) {
    install();
    for (int i = 0; i < kSlots; ++i) {
      const MappedFile* expected = nullptr;
      if (slots[static_cast<size_t>(i)].compare_exchange_strong(expected, f)) return i;
    }
    return -1;  // more live mappings than slots: this one is unguarded, as every mapping was before
  }
};

std::array<std::atomic<const MappedFile*>, MappingGuard::kSlots> MappingGuard::slots{};
struct sigaction MappingGuard::previous {};
uintptr_t MappingGuard::page = 4096;

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  struct stat st {};
  const int fd = open_regular_file(path, st);
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = static_cast<size_t>(st.st_size);
  if (m->size_ > 0) {
    // Private: a page someone writes to (a tensor viewing the file, changed in place) becomes a copy of this
    // process's own, so nothing ever writes through to the file and no write faults.
    void* p = ::mmap(nullptr, m->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw DataError(path + ": cannot map into memory: " + std::strerror(e));
    }
    m->data_ = static_cast<const uint8_t*>(p);
    m->slot_ = MappingGuard::add(m.get());
  }
  ::close(fd);
  return m;
}

void MappedFile::check_unchanged() const {
  if (changed())
    throw DataError(path_ + ": changed while it was read (another process truncated or rewrote it in place): " +
                    "nothing read from it is used; load it again once it is whole");
}

void MappedFile::release(const void* begin, size_t bytes) const {
  check_unchanged();
  const auto start = reinterpret_cast<uintptr_t>(begin), base = reinterpret_cast<uintptr_t>(data_);
  if (!data_ || start < base || bytes > size_ || start - base > size_ - bytes) return;
  release_pages(begin, bytes);
}

MappedFile::~MappedFile() {
  if (slot_ >= 0) MappingGuard::slots[static_cast<size_t>(slot_)].store(nullptr, std::memory_order_release);
  if (data_ && size_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace parla::formats
