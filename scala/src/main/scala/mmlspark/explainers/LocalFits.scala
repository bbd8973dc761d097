package mmlspark.explainers

/** The local linear fits the explainers solve, per explained row and target class: small dense
  * systems (one unknown per feature) solved on the executors with a Cholesky factorization.
  */
private[explainers] object LocalFits {

  /** A fit: the coefficients and the weighted r2 of the fitted values. */
  final case class Fit(coefficients: Array[Double], r2: Double)

  /** Solves `a x = b` for a symmetric positive semi-definite `a` (row-major, n x n); a tiny ridge
    * proportional to the diagonal keeps a singular system (a feature that never varies) solvable,
    * giving its coefficient 0.
    */
  def solveSymmetric(a: Array[Array[Double]], b: Array[Double]): Array[Double] = {
    val n = b.length
    val scale = math.max((0 until n).map(i => math.abs(a(i)(i))).foldLeft(0.0)(math.max), 1e-300)
    val l = Array.ofDim[Double](n, n)
    for (i <- 0 until n; j <- 0 to i) {
      var sum = a(i)(j) + (if (i == j) scale * 1e-12 else 0.0)
      var k = 0
      while (k < j) { sum -= l(i)(k) * l(j)(k); k += 1 }
      if (i == j) l(i)(i) = math.sqrt(math.max(sum, scale * 1e-12))
      else l(i)(j) = sum / l(j)(j)
    }
    val y = new Array[Double](n)
    for (i <- 0 until n) {
      var sum = b(i)
      for (k <- 0 until i) sum -= l(i)(k) * y(k)
      y(i) = sum / l(i)(i)
    }
    val x = new Array[Double](n)
    for (i <- (n - 1) to 0 by -1) {
      var sum = y(i)
      for (k <- i + 1 until n) sum -= l(k)(i) * x(k)
      x(i) = sum / l(i)(i)
    }
    x
  }

  /** The weighted r2 of `fitted` against `y`: 1 - residual / total sum of squares, both weighted (1
    * when `y` does not vary and the fit is exact).
    */
  def weightedR2(y: Array[Double], fitted: Array[Double], w: Array[Double]): Double = {
    val total = w.sum
    val mean = y.indices.map(i => w(i) * y(i)).sum / total
    val ssTot = y.indices.map(i => w(i) * (y(i) - mean) * (y(i) - mean)).sum
    val ssRes = y.indices.map(i => w(i) * (y(i) - fitted(i)) * (y(i) - fitted(i))).sum
    if (ssTot <= 1e-300) (if (ssRes <= 1e-300) 1.0 else 0.0) else 1.0 - ssRes / ssTot
  }

  /** Weighted ridge regression with an unpenalized intercept: minimizes sum_s w_s (y_s - b - x_s .
    * beta)^2 + lambda |beta|^2 and gives beta (LIME's local model).
    */
  def ridge(x: Array[Array[Double]], y: Array[Double], w: Array[Double], lambda: Double): Fit = {
    val m = if (x.isEmpty) 0 else x(0).length
    val total = w.sum
    val xMean = Array.tabulate(m)(j => x.indices.map(s => w(s) * x(s)(j)).sum / total)
    val yMean = y.indices.map(s => w(s) * y(s)).sum / total
    val a = Array.ofDim[Double](m, m)
    val b = new Array[Double](m)
    for (s <- x.indices) {
      val row = Array.tabulate(m)(j => x(s)(j) - xMean(j))
      for (i <- 0 until m) {
        b(i) += w(s) * row(i) * (y(s) - yMean)
        for (j <- 0 until m) a(i)(j) += w(s) * row(i) * row(j)
      }
    }
    for (i <- 0 until m) a(i)(i) += lambda
    val beta = solveSymmetric(a, b)
    val intercept = yMean - (0 until m).map(j => beta(j) * xMean(j)).sum
    val fitted = x.map(row => intercept + (0 until m).map(j => beta(j) * row(j)).sum)
    Fit(beta, weightedR2(y, fitted, w))
  }
}
