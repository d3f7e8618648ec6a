package dev.ramtrain.trainer.backend.cpu;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.Pointer;

/**
 * The native objects one owner made (oneDNN's descriptors, primitives and memories, through
 * JavaCPP), closed together, the last made first, as each may refer to those made before it.
 */
final class NativeObjects implements AutoCloseable {
  private final List<Pointer> owned = new ArrayList<>();

  /** {@code p}, now owned here. */
  <P extends Pointer> P own(P p) {
    owned.add(p);
    return p;
  }

  @Override
  public void close() {
    for (int i = owned.size() - 1; i >= 0; i--) {
      owned.get(i).close();
    }
    owned.clear();
  }
}
