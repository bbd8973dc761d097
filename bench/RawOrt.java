import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.providers.OrtCUDAProviderOptions;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Raw ONNX Runtime Java, the practical limit ONNXModel is measured against: one session shared by
 * `threads` threads (one intra-op thread each, like one Spark task per core), each copying its
 * batches of images from memory into a direct buffer, running them and reading the outputs back.
 *
 * <p>Usage: RawOrt model.onnx tensors.f32 rows channels height width batch threads [cpu|cuda]
 * (tensors.f32: rows x channels x height x width little-endian floats; cuda: the CUDA provider on
 * device 0 with ONNXModel's settings, scripts/gpu_proof.py). It loads the model, prints
 * {@code ready}, then answers each line {@code run} on its input with the seconds one run over all
 * rows took, measured here (bench/protocol.py times it like every other contender, in turn with
 * them), and ends at {@code quit} or the end of its input.
 */
public final class RawOrt {
  public static void main(String[] args) throws Exception {
    String model = args[0];
    byte[] raw = Files.readAllBytes(Paths.get(args[1]));
    int rows = Integer.parseInt(args[2]);
    long[] image = {Long.parseLong(args[3]), Long.parseLong(args[4]), Long.parseLong(args[5])};
    int batch = Integer.parseInt(args[6]);
    int threads = Integer.parseInt(args[7]);
    int perImage = (int) (image[0] * image[1] * image[2]);
    FloatBuffer all = ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
    float[] data = new float[rows * perImage];
    all.get(data);

    OrtEnvironment env = OrtEnvironment.getEnvironment();
    OrtSession.SessionOptions options = new OrtSession.SessionOptions();
    options.setIntraOpNumThreads(1);
    options.setInterOpNumThreads(1);
    options.setExecutionMode(OrtSession.SessionOptions.ExecutionMode.SEQUENTIAL);
    options.setOptimizationLevel(OrtSession.SessionOptions.OptLevel.ALL_OPT);
    if (args.length > 8 && args[8].equals("cuda")) {
      OrtCUDAProviderOptions cuda = new OrtCUDAProviderOptions(0);
      cuda.add("cudnn_conv_algo_search", "EXHAUSTIVE");
      cuda.add("arena_extend_strategy", "kSameAsRequested");
      options.addCUDA(cuda);
    }
    OrtSession session = env.createSession(model, options);
    String input = session.getInputNames().iterator().next();

    BufferedReader commands = new BufferedReader(new InputStreamReader(System.in));
    System.out.println("ready");
    System.out.flush();
    for (String line = commands.readLine(); line != null; line = commands.readLine()) {
      if (line.equals("quit")) break;
      if (!line.equals("run")) throw new IllegalArgumentException("unknown command: " + line);
      long start = System.nanoTime();
      runAll(env, session, input, data, rows, image, perImage, batch, threads);
      System.out.println((System.nanoTime() - start) / 1e9);
      System.out.flush();
    }
    session.close();
  }

  /** Thread t runs the rows of partition t (contiguous, like a Spark partition), batch by batch. */
  private static void runAll(
      OrtEnvironment env, OrtSession session, String input, float[] data, int rows, long[] image,
      int perImage, int batch, int threads) throws Exception {
    List<Thread> workers = new ArrayList<>();
    List<Exception> failures = new ArrayList<>();
    int share = (rows + threads - 1) / threads;
    for (int t = 0; t < threads; t++) {
      int from = t * share;
      int to = Math.min(rows, from + share);
      Thread worker = new Thread(() -> {
        try {
          ByteBuffer buffer =
              ByteBuffer.allocateDirect(batch * perImage * 4).order(ByteOrder.nativeOrder());
          for (int first = from; first < to; first += batch) {
            int n = Math.min(batch, to - first);
            FloatBuffer floats = buffer.asFloatBuffer();
            floats.put(data, first * perImage, n * perImage);
            floats.flip();
            long[] shape = {n, image[0], image[1], image[2]};
            try (OnnxTensor tensor = OnnxTensor.createTensor(env, floats, shape);
                OrtSession.Result result = session.run(Map.of(input, tensor))) {
              FloatBuffer out = ((OnnxTensor) result.get(0)).getFloatBuffer();
              float[] perRow = new float[out.remaining() / n];
              for (int i = 0; i < n; i++) out.get(perRow);
            }
          }
        } catch (Exception e) {
          synchronized (failures) {
            failures.add(e);
          }
        }
      });
      workers.add(worker);
      worker.start();
    }
    for (Thread w : workers) w.join();
    if (!failures.isEmpty()) throw failures.get(0);
  }
}
