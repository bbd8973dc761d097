package mmlspark.explainers

import mmlspark.opencv.{
  CenterCrop,
  Crop,
  Flip,
  ImageOp,
  Letterbox,
  LetterboxGeometry,
  Resize,
  ResizeShorter
}

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

  /** Where the image that the geometric `ops` make of a `sourceHeight` x `sourceWidth` image lies
    * in it: `[ax, bx, ay, by]`, a point (x, y) of the source in pixel-edge coordinates (pixel i
    * spans [i, i + 1)) going to (ax x + bx, ay y + by). Each operation's own size arithmetic
    * (resizeShorter's rounding, centerCrop's offsets, letterbox's scale and padding) on the
    * full-size source; each step is `a * s` and `b * s + t` per axis, in the engine's order, so
    * both backends give the same doubles. OpenCV's resize maps pixel centres, `(x + 0.5) s - 0.5`:
    * in edge coordinates `x s`.
    */
  def view(ops: Seq[ImageOp], sourceHeight: Int, sourceWidth: Int): Array[Double] = {
    var (h, w) = (sourceHeight, sourceWidth)
    var (ax, bx, ay, by) = (1.0, 0.0, 1.0, 0.0)
    def step(sx: Double, tx: Double, sy: Double, ty: Double): Unit = {
      ax = ax * sx
      bx = bx * sx + tx
      ay = ay * sy
      by = by * sy + ty
    }
    def scaleTo(nh: Int, nw: Int): Unit = {
      step(nw.toDouble / w, 0.0, nh.toDouble / h, 0.0)
      h = nh
      w = nw
    }
    ops.foreach {
      case Resize(height, width, _) => scaleTo(height, width)
      case ResizeShorter(size, _) =>
        val scale = size.toDouble / math.min(h, w)
        if (h <= w) scaleTo(size, math.round(w * scale).toInt)
        else scaleTo(math.round(h * scale).toInt, size)
      case Crop(x, y, height, width) =>
        step(1.0, -x.toDouble, 1.0, -y.toDouble)
        h = height
        w = width
      case CenterCrop(height, width) =>
        step(1.0, -((w - width) / 2).toDouble, 1.0, -((h - height) / 2).toDouble)
        h = height
        w = width
      case Letterbox(size, _) =>
        val g = LetterboxGeometry(h, w, size)
        step(
          g.scaledWidth.toDouble / w,
          g.left.toDouble,
          g.scaledHeight.toDouble / h,
          g.top.toDouble
        )
        h = size
        w = size
      case Flip(code) =>
        // 0 flips up-down, a positive code left-right, a negative one both (OpenCV's flip)
        val (flipX, flipY) = (code != 0, code <= 0)
        step(
          if (flipX) -1.0 else 1.0,
          if (flipX) w.toDouble else 0.0,
          if (flipY) -1.0 else 1.0,
          if (flipY) h.toDouble else 0.0
        )
      case other => throw new IllegalArgumentException(s"${other.op} is not a geometric operation")
    }
    Array(ax, bx, ay, by)
  }
}
