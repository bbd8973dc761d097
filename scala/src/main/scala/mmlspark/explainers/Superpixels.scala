package mmlspark.explainers

/** The image explainers' superpixels and samples: SLIC-style clustering, LIME's masks, and the
  * perturbed pixels. The same arithmetic as the Python engine's `mmlspark._engine.superpixels`,
  * step for step, so that both backends give the same superpixels and LIME masks for the same image
  * (every sum is of integers, exact in a double, and ties go to the lower cluster on both).
  *
  * SLIC (Achanta et al., 2012) on the image's own channels (0 to 255 each, not Lab): cluster
  * centres start on a grid of about `cellSize` pixels; each of ten rounds gives every pixel within
  * `cellSize` of a centre (in y and in x) to the centre of least `dc^2 + ds^2 (modifier /
  * cellSize)^2` (dc the colour distance, ds the distance in pixels), then moves each centre to the
  * mean of its pixels. Superpixels are numbered in the order their first pixel appears, row by row.
  */
private[explainers] object Superpixels {

  val Iterations = 10

  /** Each pixel's superpixel, row-major, for an 8-bit image of `channels` interleaved channels. */
  def slic(
      pixels: Array[Byte],
      height: Int,
      width: Int,
      channels: Int,
      cellSize: Double,
      modifier: Double
  ): Array[Int] = {
    val (h, w) = (height, width)
    def sample(p: Int, c: Int): Double = (pixels(p * channels + c) & 0xff).toDouble
    val ny = math.max(1, math.floor(h / cellSize + 0.5).toInt)
    val nx = math.max(1, math.floor(w / cellSize + 0.5).toInt)
    val count = ny * nx
    val cy = Array.tabulate(count)(k => (k / nx + 0.5) * h / ny)
    val cx = Array.tabulate(count)(k => (k % nx + 0.5) * w / nx)
    val colours = Array.tabulate(count, channels) { (k, c) =>
      sample(math.floor(cy(k)).toInt * w + math.floor(cx(k)).toInt, c)
    }
    val labels = Array.tabulate(h * w) { p =>
      ((p / w).toLong * ny / h).toInt * nx + ((p % w).toLong * nx / w).toInt
    }
    val ratio = (modifier / cellSize) * (modifier / cellSize)
    val best = new Array[Double](h * w)
    val sizes = new Array[Long](count)
    val sums = Array.ofDim[Double](count, channels + 2)
    for (_ <- 0 until Iterations) {
      java.util.Arrays.fill(best, Double.PositiveInfinity)
      for (k <- 0 until count) {
        val y0 = math.max(0, math.floor(cy(k) - cellSize).toInt)
        val y1 = math.min(h, math.floor(cy(k) + cellSize).toInt + 1)
        val x0 = math.max(0, math.floor(cx(k) - cellSize).toInt)
        val x1 = math.min(w, math.floor(cx(k) + cellSize).toInt + 1)
        var y = y0
        while (y < y1) {
          val dy = y.toDouble - cy(k)
          var x = x0
          while (x < x1) {
            val p = y * w + x
            var d = sample(p, 0) - colours(k)(0)
            var distance = d * d
            var c = 1
            while (c < channels) {
              d = sample(p, c) - colours(k)(c)
              distance = distance + d * d
              c += 1
            }
            val dx = x.toDouble - cx(k)
            distance = distance + (dy * dy + dx * dx) * ratio
            if (distance < best(p)) {
              best(p) = distance
              labels(p) = k
            }
            x += 1
          }
          y += 1
        }
      }
      java.util.Arrays.fill(sizes, 0L)
      sums.foreach(java.util.Arrays.fill(_, 0.0))
      for (p <- 0 until h * w) {
        val k = labels(p)
        sizes(k) += 1
        sums(k)(0) += p / w
        sums(k)(1) += p % w
        for (c <- 0 until channels) sums(k)(c + 2) += sample(p, c)
      }
      for (k <- 0 until count if sizes(k) > 0) {
        val n = sizes(k).toDouble
        cy(k) = sums(k)(0) / n
        cx(k) = sums(k)(1) / n
        for (c <- 0 until channels) colours(k)(c) = sums(k)(c + 2) / n
      }
    }
    val renumber = Array.fill(count)(-1)
    var next = 0
    labels.map { k =>
      if (renumber(k) < 0) {
        renumber(k) = next
        next += 1
      }
      renumber(k)
    }
  }

  /** A uniform draw in [0, 1) per (sample, feature): splitmix64's finalizer of seed + (sample <<
    * 32) + feature, its top 53 bits (the engine's `_uniform`).
    */
  def uniform(seed: Long, sample: Int, feature: Int): Double = {
    var z = seed + (sample.toLong << 32) + feature + 0x9e3779b97f4a7c15L
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL
    z = z ^ (z >>> 31)
    (z >>> 11).toDouble * (1.0 / (1L << 53))
  }

  /** LIME's sample `s` as a 0/1 mask over the superpixels: the first keeps them all (the image
    * itself), each other keeps a superpixel where its draw is below `fraction`.
    */
  def limeMask(features: Int, s: Int, fraction: Double, seed: Long): Array[Double] =
    Array.tabulate(features)(j => if (s == 0 || uniform(seed, s, j) < fraction) 1.0 else 0.0)

  /** The pixels with the superpixels whose mask is 0 black (every byte of their pixels 0). */
  def perturb(pixels: Array[Byte], labels: Array[Int], mask: Array[Double]): Array[Byte] = {
    val out = pixels.clone()
    val bytesPerPixel = pixels.length / labels.length
    var p = 0
    while (p < labels.length) {
      if (mask(labels(p)) == 0.0)
        java.util.Arrays.fill(out, p * bytesPerPixel, (p + 1) * bytesPerPixel, 0.toByte)
      p += 1
    }
    out
  }
}
