package dev.ramtrain.trainer.backend;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;
import java.util.function.Function;
import java.util.function.ToIntFunction;

/**
 * One engine's implementation of each operation, found by the operation's record type: how an
 * engine's {@code run} dispatches without a method per operation on the {@link Backend} interface.
 *
 * @param <S> the engine's stream type, which each implementation enqueues its work on
 */
public final class OperationTable<S extends Stream> {
  private final String engine;
  private final OperationTable<S> fallback;
  private final Map<Class<? extends Operation>, BiConsumer<? extends Operation, S>> entries =
      new HashMap<>();

  /** A table of its own, for an engine that implements every operation it runs. */
  public OperationTable(String engine) {
    this(engine, null);
  }

  /**
   * A table that runs what it registers itself and hands every other operation to {@code fallback}:
   * how an engine built on a library (oneDNN, NVIDIA's) registers only what the library computes,
   * over the engine's own kernels.
   */
  public OperationTable(String engine, OperationTable<S> fallback) {
    this.engine = engine;
    this.fallback = fallback;
  }

  /** Registers how this engine runs operations of {@code type}; each type once. */
  public <O extends Operation> OperationTable<S> add(Class<O> type, BiConsumer<O, S> impl) {
    if (entries.putIfAbsent(type, impl) != null) {
      throw new IllegalStateException(engine + " implements " + type.getSimpleName() + " twice");
    }
    return this;
  }

  /**
   * Registers {@code type} as the operations {@code lowering} turns it into, each run by this
   * table: how an engine without its own kernel for {@code type} still implements it.
   */
  public <O extends Operation> OperationTable<S> addLowered(
      Class<O> type, Function<O, List<Operation>> lowering) {
    return add(type, (op, stream) -> lowering.apply(op).forEach(part -> run(part, stream)));
  }

  /**
   * Registers {@code impl} for {@code type} over NCHW tensors only: an operation whose channels are
   * blocked ({@code channelBlock} not 1, a layout only the oneDNN engine computes in) is refused,
   * naming it.
   */
  public <O extends Operation> OperationTable<S> addNchw(
      Class<O> type, ToIntFunction<O> channelBlock, BiConsumer<O, S> impl) {
    return add(
        type,
        (op, stream) -> {
          ArgumentChecks.requirePlainChannels(channelBlock.applyAsInt(op), type.getSimpleName());
          impl.accept(op, stream);
        });
  }

  public void run(Operation op, S stream) {
    @SuppressWarnings("unchecked") // add() keys each entry by the record type it accepts
    BiConsumer<Operation, S> impl = (BiConsumer<Operation, S>) entries.get(op.getClass());
    if (impl != null) {
      impl.accept(op, stream);
    } else if (fallback != null) {
      fallback.run(op, stream);
    } else {
      throw new UnsupportedOperationException(
          "backend " + engine + " does not implement " + op.getClass().getSimpleName());
    }
  }
}
