package dev.ramtrain.trainer.checkpoint;

import dev.ramtrain.console.Printable;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The pickle of a PyTorch state dict ({@code data.pkl} of a {@code torch.save} archive), read by a
 * machine that knows only what a tensor state dict needs: the opcodes of protocols 2 to 4 that
 * build strings, numbers, tuples, lists and dicts, and three kinds of globals, {@code
 * collections.OrderedDict}, {@code torch._utils._rebuild_tensor_v2} and torch's storage types.
 * Nothing is ever called: a global is checked when its opcode is read, before anything uses it, and
 * any other (a pickle is code: {@code posix.system}, another class's {@code __reduce__}) ends the
 * read with an error naming it. Sizes, memo indices and nesting are bounded before anything is
 * allocated.
 */
final class StateDictPickle {
  /** A storage a tensor views: torch's type, its key in the archive, its element count. */
  record Storage(String type, String key, long numel) {}

  /** {@code _rebuild_tensor_v2}'s arguments: a strided view of a storage. */
  record TensorView(Storage storage, long offset, long[] size, long[] stride) {}

  /** An allowed global, by module and name. */
  private record Global(String module, String name) {}

  private static final Set<String> STORAGES =
      Set.of("FloatStorage", "HalfStorage", "BFloat16Storage", "LongStorage", "DoubleStorage");
  private static final int MAX_DEPTH = 10_000;
  private static final int MAX_MEMO = 1_000_000;
  private static final Object MARK = new Object();

  private final String where;
  private final ByteBuffer in;
  private final Deque<Object> stack = new ArrayDeque<>();
  private final Deque<Integer> marks = new ArrayDeque<>();
  private final Map<Integer, Object> memo = new HashMap<>();

  private StateDictPickle(String where, byte[] bytes) {
    this.where = where;
    this.in = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
  }

  /**
   * The state dict {@code bytes} hold: parameter names to tensor views, in order.
   *
   * @throws IOException naming {@code where} and the offending opcode, global or value
   */
  static Map<String, TensorView> read(String where, byte[] bytes) throws IOException {
    Object result = new StateDictPickle(where, bytes).run();
    if (!(result instanceof Map<?, ?> map)) {
      throw new IOException(where + ": the pickle holds " + kind(result) + ", not a state dict");
    }
    Map<String, TensorView> dict = new LinkedHashMap<>();
    for (Map.Entry<?, ?> e : map.entrySet()) {
      if (!(e.getKey() instanceof String name) || !(e.getValue() instanceof TensorView t)) {
        throw new IOException(
            where
                + ": entry "
                + Printable.name(String.valueOf(e.getKey()))
                + " is "
                + kind(e.getValue())
                + ", not a tensor");
      }
      dict.put(name, t);
    }
    return dict;
  }

  private Object run() throws IOException {
    try {
      while (true) {
        int at = in.position();
        int op = in.get() & 0xFF;
        switch (op) {
          case 0x80 -> { // PROTO
            int protocol = in.get() & 0xFF;
            if (protocol > 5) {
              throw fail(at, "pickle protocol " + protocol);
            }
          }
          case 0x95 -> in.getLong(); // FRAME: a length hint
          case '.' -> { // STOP
            if (stack.size() != 1) {
              throw fail(at, "STOP with " + stack.size() + " values on the stack");
            }
            return stack.pop();
          }
          case '(' -> {
            marks.push(stack.size());
            push(MARK);
          }
          case ')' -> push(List.of());
          case ']' -> push(new ArrayList<>());
          case '}' -> push(new LinkedHashMap<>());
          case 'N' -> push(null);
          case 0x88 -> push(Boolean.TRUE);
          case 0x89 -> push(Boolean.FALSE);
          case 'J' -> push((long) in.getInt());
          case 'K' -> push((long) (in.get() & 0xFF));
          case 'M' -> push((long) (in.getShort() & 0xFFFF));
          case 0x8a -> push(long1(at));
          case 'G' -> push(bigEndianDouble()); // BINFLOAT
          case 'X' -> push(string(at, in.getInt() & 0xFFFFFFFFL));
          case 0x8c -> push(string(at, in.get() & 0xFF)); // SHORT_BINUNICODE
          case 'q' -> memo(at, in.get() & 0xFF);
          case 'r' -> memo(at, in.getInt() & 0xFFFFFFFFL);
          case 0x94 -> memo(at, memo.size()); // MEMOIZE
          case 'h' -> push(recall(at, in.get() & 0xFF));
          case 'j' -> push(recall(at, in.getInt() & 0xFFFFFFFFL));
          case 't' -> push(List.copyOf(nonNull(popToMark(at))));
          case 0x85 -> push(tuple(1));
          case 0x86 -> push(tuple(2));
          case 0x87 -> push(tuple(3));
          case 'c' -> push(global(at, line(at), line(at)));
          case 0x93 -> { // STACK_GLOBAL
            Object name = pop(at);
            Object module = pop(at);
            if (!(module instanceof String m) || !(name instanceof String n)) {
              throw fail(at, "STACK_GLOBAL of " + kind(module) + " and " + kind(name));
            }
            push(global(at, m, n));
          }
          case 'Q' -> push(storage(at, pop(at)));
          case 'R' -> {
            Object args = pop(at);
            push(reduce(at, pop(at), args));
          }
          case 'b' -> build(at, pop(at));
          case 's' -> {
            Object value = pop(at);
            Object key = key(at, pop(at));
            dict(at, peek(at)).put(key, value);
          }
          case 'u' -> {
            List<Object> items = popToMark(at);
            Map<Object, Object> dict = dict(at, peek(at));
            if (items.size() % 2 != 0) {
              throw fail(at, "SETITEMS with an odd number of values");
            }
            for (int i = 0; i < items.size(); i += 2) {
              dict.put(key(at, items.get(i)), items.get(i + 1));
            }
          }
          case 'a' -> {
            Object value = pop(at);
            list(at, peek(at)).add(value);
          }
          case 'e' -> {
            List<Object> items = popToMark(at);
            list(at, peek(at)).addAll(items);
          }
          default ->
              throw fail(at, String.format("opcode 0x%02x, which a state dict never needs", op));
        }
      }
    } catch (java.nio.BufferUnderflowException e) {
      throw new IOException(where + ": the pickle ends in the middle of an opcode (truncated?)");
    }
  }

  /**
   * A dict key as a state dict has them: a name or a number. A container key is refused before it
   * is hashed: a tuple nested 100,000 deep, or a dict that holds itself, overflowed the stack.
   */
  private Object key(int at, Object key) throws IOException {
    if (key instanceof List<?> || key instanceof Map<?, ?>) {
      throw fail(at, "a dict key that is a " + kind(key) + " (a state dict's keys are names)");
    }
    return key;
  }

  private double bigEndianDouble() {
    return Double.longBitsToDouble(Long.reverseBytes(in.getLong()));
  }

  private void push(Object value) throws IOException {
    if (stack.size() >= MAX_DEPTH) {
      throw new IOException(where + ": the pickle nests deeper than " + MAX_DEPTH);
    }
    stack.push(value == null ? NULL : value);
  }

  /** The stack cannot hold Java nulls: pickle's None stands in as this. */
  private static final Object NULL = new Object();

  private Object pop(int at) throws IOException {
    if (stack.isEmpty() || stack.peek() == MARK) {
      throw fail(at, "an opcode with nothing to take from the stack");
    }
    Object v = stack.pop();
    return v == NULL ? null : v;
  }

  private Object peek(int at) throws IOException {
    if (stack.isEmpty() || stack.peek() == MARK) {
      throw fail(at, "an opcode with nothing on the stack to add to");
    }
    return stack.peek();
  }

  private List<Object> popToMark(int at) throws IOException {
    if (marks.isEmpty()) {
      throw fail(at, "an opcode that needs a MARK, without one");
    }
    int depth = marks.pop();
    List<Object> items = new ArrayList<>();
    while (stack.size() > depth + 1) {
      Object v = stack.pop();
      items.add(0, v == NULL ? null : v);
    }
    if (stack.pop() != MARK) {
      throw fail(at, "a MARK taken by another opcode");
    }
    return items;
  }

  private static List<Object> nonNull(List<Object> items) {
    List<Object> out = new ArrayList<>(items.size());
    for (Object o : items) {
      out.add(o == null ? NULL : o);
    }
    return out;
  }

  private List<Object> tuple(int n) throws IOException {
    Object[] items = new Object[n];
    for (int i = n - 1; i >= 0; i--) {
      Object v = pop(in.position() - 1);
      items[i] = v == null ? NULL : v;
    }
    return List.of(items);
  }

  private long long1(int at) throws IOException {
    int n = in.get() & 0xFF;
    if (n > 8) {
      throw fail(at, "an integer of " + n + " bytes");
    }
    long v = 0;
    for (int i = 0; i < n; i++) {
      v |= (long) (in.get() & 0xFF) << (8 * i);
    }
    if (n > 0 && n < 8 && (v >>> (8 * n - 1) & 1) == 1) {
      v |= -1L << (8 * n); // sign extension
    }
    return v;
  }

  private String string(int at, long length) throws IOException {
    if (length > in.remaining()) {
      throw fail(at, "a string of " + length + " bytes with " + in.remaining() + " left");
    }
    byte[] bytes = new byte[(int) length];
    in.get(bytes);
    return new String(bytes, StandardCharsets.UTF_8);
  }

  /** GLOBAL's "module\n" or "name\n", at most 256 bytes. */
  private String line(int at) throws IOException {
    StringBuilder out = new StringBuilder();
    while (true) {
      byte b = in.get();
      if (b == '\n') {
        return out.toString();
      }
      if (out.length() > 256 || b < 0x20) {
        throw fail(at, "a GLOBAL that is not a short module and name");
      }
      out.append((char) b);
    }
  }

  private void memo(int at, long index) throws IOException {
    if (index >= MAX_MEMO) {
      throw fail(at, "memo index " + index);
    }
    memo.put((int) index, peek(at));
  }

  private Object recall(int at, long index) throws IOException {
    Object v = memo.get((int) Math.min(index, Integer.MAX_VALUE));
    if (v == null) {
      throw fail(at, "memo index " + index + " recalled before it was stored");
    }
    return v;
  }

  /** The one place a global is let in: only what a state dict needs, refused before any use. */
  private Global global(int at, String module, String name) throws IOException {
    boolean allowed =
        (module.equals("collections") && name.equals("OrderedDict"))
            || (module.equals("torch._utils") && name.equals("_rebuild_tensor_v2"))
            || (module.equals("torch") && STORAGES.contains(name));
    if (!allowed) {
      throw new IOException(
          where
              + ": the pickle asks for "
              + module
              + "."
              + name
              + " (at byte "
              + at
              + "): a weights file may only hold tensors; refused before running anything");
    }
    return new Global(module, name);
  }

  /** BINPERSID's ('storage', type, key, location, numel): a storage of the archive. */
  private Storage storage(int at, Object pid) throws IOException {
    if (pid instanceof List<?> t
        && t.size() == 5
        && "storage".equals(t.get(0))
        && t.get(1) instanceof Global type
        && type.module().equals("torch")
        && t.get(2) instanceof String key
        && t.get(4) instanceof Long numel) {
      if (numel < 0 || numel > Integer.MAX_VALUE) {
        throw fail(at, "a storage of " + numel + " elements");
      }
      return new Storage(type.name(), key, numel);
    }
    throw fail(at, "a persistent id that is not a storage: " + kind(pid));
  }

  private Object reduce(int at, Object callable, Object args) throws IOException {
    if (!(callable instanceof Global g) || !(args instanceof List<?> a)) {
      throw fail(at, "REDUCE of " + kind(callable));
    }
    if (g.name().equals("OrderedDict") && a.isEmpty()) {
      return new LinkedHashMap<>();
    }
    if (g.name().equals("_rebuild_tensor_v2") && a.size() >= 4) {
      if (a.get(0) instanceof Storage s && a.get(1) instanceof Long offset) {
        long[] size = longs(at, a.get(2));
        long[] stride = longs(at, a.get(3));
        if (size.length != stride.length || offset < 0) {
          throw fail(
              at,
              "a tensor of size "
                  + Arrays.toString(size)
                  + ", stride "
                  + Arrays.toString(stride)
                  + " and offset "
                  + offset);
        }
        return new TensorView(s, offset, size, stride);
      }
    }
    throw fail(at, g.module() + "." + g.name() + " with arguments " + kind(args));
  }

  private long[] longs(int at, Object tuple) throws IOException {
    if (!(tuple instanceof List<?> t) || t.size() > 8) {
      throw fail(at, "a shape that is not a tuple of at most 8 integers");
    }
    long[] out = new long[t.size()];
    for (int i = 0; i < out.length; i++) {
      if (!(t.get(i) instanceof Long v) || v < 0) {
        throw fail(at, "a shape with " + kind(t.get(i)));
      }
      out[i] = v;
    }
    return out;
  }

  /** BUILD on an OrderedDict: its attributes (a state dict's _metadata), which ramtrain ignores. */
  private void build(int at, Object state) throws IOException {
    if (!(peek(at) instanceof Map<?, ?>) || !(state instanceof Map<?, ?>)) {
      throw fail(at, "BUILD of " + kind(peek(at)));
    }
  }

  @SuppressWarnings("unchecked") // the machine's maps are LinkedHashMap<Object, Object>
  private Map<Object, Object> dict(int at, Object target) throws IOException {
    if (!(target instanceof LinkedHashMap<?, ?>)) {
      throw fail(at, "SETITEM on " + kind(target));
    }
    return (Map<Object, Object>) target;
  }

  @SuppressWarnings("unchecked") // the machine's lists are ArrayList<Object>
  private List<Object> list(int at, Object target) throws IOException {
    if (!(target instanceof ArrayList<?>)) {
      throw fail(at, "APPEND on " + kind(target));
    }
    return (List<Object>) target;
  }

  private IOException fail(int at, String what) {
    return new IOException(where + ": the pickle has " + what + " at byte " + at);
  }

  private static String kind(Object o) {
    if (o == null || o == NULL) {
      return "None";
    }
    if (o instanceof Global g) {
      return g.module() + "." + g.name();
    }
    return o.getClass().getSimpleName();
  }
}
