package dev.ramtrain.trainer.backend.cpu;

import org.bytedeco.dnnl.IntMemoryMap;
import org.bytedeco.dnnl.engine;
import org.bytedeco.dnnl.memory;
import org.bytedeco.dnnl.primitive;
import org.bytedeco.dnnl.stream;
import org.bytedeco.javacpp.Pointer;

/**
 * One oneDNN primitive made for a shape, with a memory per argument over no buffer of its own: each
 * call points them at the backend's buffers and runs it.
 */
final class BoundPrimitive implements AutoCloseable {
  private final NativeObjects natives;
  private final primitive primitive;
  private final memory[] memories;
  private final IntMemoryMap arguments;

  /**
   * {@code primitive}, taking argument {@code args[i]} in layout {@code descs[i]}; {@code natives}
   * (what made it: its descriptors) becomes this one's to close.
   */
  BoundPrimitive(
      NativeObjects natives, engine eng, primitive primitive, int[] args, memory.desc[] descs) {
    this.natives = natives;
    this.primitive = natives.own(primitive);
    this.memories = new memory[args.length];
    this.arguments = natives.own(new IntMemoryMap());
    for (int i = 0; i < args.length; i++) {
      memories[i] = natives.own(new memory(descs[i], eng, (Pointer) null));
      arguments.put(args[i], memories[i]);
    }
  }

  /** Runs on the buffers at {@code data} (byte-positioned), one per argument, in order. */
  void run(stream st, Pointer... data) {
    for (int i = 0; i < memories.length; i++) {
      memories[i].set_data_handle(data[i]);
    }
    primitive.execute(st, arguments);
    st._wait();
  }

  @Override
  public void close() {
    natives.close();
  }
}
