// The emulator's fibers: a block's threads, each on a stack of its own, switching at __syncthreads.
// ucontext's swapcontext saves and restores the signal mask with a system call at every switch
// (rt_sigprocmask and its copies to and from the kernel were 70% of an emulated ResNet's time), so
// on x86-64 a switch is what the System V ABI asks a call to preserve (rbx, rbp, r12-r15, the MXCSR
// and x87 control words) pushed on one stack and popped from the other. Elsewhere, ucontext.
// The switch is defined here, in assembly: include this header from one source of a library only
// (cuda_emulator.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace emu {

#if defined(__x86_64__)

struct FiberContext {
  void* sp = nullptr;  // the saved registers lie here, then the address the switch returns to
};

extern "C" void ramtrain_emu_fiber_switch(void** save_sp, void* load_sp);

__asm__(
    ".text\n"
    ".globl ramtrain_emu_fiber_switch\n"
    ".hidden ramtrain_emu_fiber_switch\n"
    ".type ramtrain_emu_fiber_switch, @function\n"
    "ramtrain_emu_fiber_switch:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  subq $8, %rsp\n"
    "  stmxcsr (%rsp)\n"
    "  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n"
    "  fldcw 4(%rsp)\n"
    "  addq $8, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    ".size ramtrain_emu_fiber_switch, .-ramtrain_emu_fiber_switch\n");

/** Saves the running fiber's state in {@code from} and resumes {@code to}. */
inline void fiber_switch(FiberContext& from, FiberContext& to) {
  ramtrain_emu_fiber_switch(&from.sp, to.sp);
}

/**
 * Makes {@code fiber} start {@code entry} on the stack [base, base + size) when first switched
 * to; {@code entry} must never return (it switches away for the last time).
 */
inline void fiber_make(FiberContext& fiber, char* base, size_t size, void (*entry)()) {
  uintptr_t top = (reinterpret_cast<uintptr_t>(base) + size) & ~uintptr_t{15};
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                         // entry's return address: it never returns
  *--sp = reinterpret_cast<void*>(entry);  // the switch's ret lands here, rsp = 8 mod 16
  for (int reg = 0; reg < 6; reg++) *--sp = nullptr;  // rbp, rbx, r12-r15
  uint32_t control[2] = {0, 0};
  __asm__ volatile("stmxcsr %0" : "=m"(control[0]));
  __asm__ volatile("fnstcw %0" : "=m"(control[1]));
  *--sp = nullptr;
  static_assert(sizeof(control) == sizeof(void*), "one slot for the control words");
  __builtin_memcpy(sp, control, sizeof(control));
  fiber.sp = sp;
}

#else

struct FiberContext {
  ucontext_t context;
};

inline void fiber_switch(FiberContext& from, FiberContext& to) {
  swapcontext(&from.context, &to.context);
}

inline void fiber_make(FiberContext& fiber, char* base, size_t size, void (*entry)()) {
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = base;
  fiber.context.uc_stack.ss_size = size;
  fiber.context.uc_link = nullptr;
  makecontext(&fiber.context, entry, 0);
}

#endif

}  // namespace emu
