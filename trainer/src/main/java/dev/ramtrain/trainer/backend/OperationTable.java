package dev.ramtrain.trainer.backend;

import dev.ramtrain.trainer.backend.ops.Operation;
import java.util.HashMap;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * One engine's implementation of each operation, found by the operation's record type: how an
 * engine's {@code run} dispatches without a method per operation on the {@link Backend} interface.
 *
 * @param <S> the engine's stream type, which each implementation enqueues its work on
 */
public final class OperationTable<S extends Stream> {
  private final String engine;
  private final Map<Class<? extends Operation>, BiConsumer<? extends Operation, S>> entries =
      new HashMap<>();

  public OperationTable(String engine) {
    this.engine = engine;
  }

  /** Registers how this engine runs operations of {@code type}; each type once. */
  public <O extends Operation> OperationTable<S> add(Class<O> type, BiConsumer<O, S> impl) {
    if (entries.putIfAbsent(type, impl) != null) {
      throw new IllegalStateException(engine + " implements " + type.getSimpleName() + " twice");
    }
    return this;
  }

  public void run(Operation op, S stream) {
    @SuppressWarnings("unchecked") // add() keys each entry by the record type it accepts
    BiConsumer<Operation, S> impl = (BiConsumer<Operation, S>) entries.get(op.getClass());
    if (impl == null) {
      throw new UnsupportedOperationException(
          "backend " + engine + " does not implement " + op.getClass().getSimpleName());
    }
    impl.accept(op, stream);
  }
}
