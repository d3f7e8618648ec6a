package dev.ramtrain.trainer.backend.cuda;

import org.bytedeco.javacpp.Pointer;

/**
 * A device address as JavaCPP's bindings of NVIDIA's libraries take it: a {@link Pointer} that owns
 * nothing (the arena owns the memory) and is never read on the host. Setting a Pointer's address in
 * a subclass is how JavaCPP wraps memory allocated elsewhere.
 */
final class DevicePointer extends Pointer {
  DevicePointer(long address) {
    this.address = address;
  }

  /** The address {@code bytes} further on. */
  DevicePointer plus(long bytes) {
    return new DevicePointer(address() + bytes);
  }
}
