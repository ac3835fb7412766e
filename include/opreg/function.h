// opreg::Function<R(A...)>: a copyable, type-erased callable, the small part of std::function
// the registry's API needs. It exists so that the public headers do not pull in <functional>
// (about a quarter of a second of every client translation unit), and so that dispatch can
// call a plain function pointer without an extra indirection.
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

namespace opreg {

template <class Signature>
class Function;

template <class R, class... A>
class Function<R(A...)> {
 public:
  using Pointer = R (*)(A...);

  Function() = default;
  Function(std::nullptr_t) {}  // NOLINT(google-explicit-constructor): as std::function

  // Any callable invocable with A... whose result converts to R: a lambda, a function object,
  // a function pointer, a std::function. Called like std::function calls it (not as const).
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, Function> && std::is_invocable_r_v<R, std::decay_t<F>&, A...>)
  Function(F&& f) {  // NOLINT(google-explicit-constructor): as std::function
    using Stored = std::decay_t<F>;
    if constexpr (std::is_convertible_v<Stored, Pointer>) {
      // Function pointers and capture-less lambdas: no allocation, and pointer() exposes them.
      pointer_ = static_cast<Pointer>(f);
      if (pointer_ == nullptr) return;  // a null function pointer is an empty Function
      call_ = [](const Function& self, A... args) -> R { return self.pointer_(std::forward<A>(args)...); };
    } else {
      state_ = std::make_shared<Stored>(std::forward<F>(f));
      call_ = [](const Function& self, A... args) -> R {
        return static_cast<R>((*static_cast<Stored*>(self.state_.get()))(std::forward<A>(args)...));
      };
    }
  }

  explicit operator bool() const { return call_ != nullptr; }

  R operator()(A... args) const { return call_(*this, std::forward<A>(args)...); }

  // The plain function this holds (a function pointer or a capture-less lambda), else nullptr.
  Pointer pointer() const { return pointer_; }

 private:
  std::shared_ptr<void> state_;
  Pointer pointer_ = nullptr;
  R (*call_)(const Function&, A...) = nullptr;
};

}  // namespace opreg
