package mmlspark.explainers

import scala.util.Random

/** Kernel SHAP (Lundberg and Lee, 2017): the coalitions of features whose values are taken from the
  * explained row (the others from background rows), their Shapley kernel weights, and the weighted
  * least squares fit under the efficiency constraint that gives the SHAP values.
  */
private[explainers] object KernelShap {

  /** Coalitions as 0/1 masks over the features, with their weights. The first two are the empty and
    * the full coalition (the base value and the model's value of the row, which the fit takes as
    * constraints, not samples).
    */
  final case class Coalitions(masks: Array[Array[Double]], weights: Array[Double])

  /** How many coalitions are sampled for `features` features when `numSamples` is unset: 2 *
    * features + 2048 (as the shap package does).
    */
  def defaultSamples(features: Int): Int = 2 * features + 2048

  private def binomial(n: Int, k: Int): Double =
    (1 to k).foldLeft(1.0)((acc, i) => acc * (n - k + i) / i)

  /** Whether `samples` coalitions cover every proper, non-empty coalition of `features`. */
  def enumerates(features: Int, samples: Int): Boolean =
    features < 31 && (1L << features) - 2 <= samples.toLong

  /** The coalitions for `features` features: every proper, non-empty one with its Shapley kernel
    * weight (M - 1) / (C(M, |z|) |z| (M - |z|)) when `samples` covers them all (the exact
    * solution), else `samples` of them drawn with the kernel's distribution over sizes, each with
    * its complement, weighted equally.
    */
  def coalitions(features: Int, samples: Int, seed: Long): Coalitions = {
    val m = features
    val ends = Array(Array.fill(m)(0.0), Array.fill(m)(1.0))
    if (m <= 1) return Coalitions(ends, Array(0.0, 0.0))
    val (masks, weights) =
      if (enumerates(m, samples)) {
        val all = (1 until (1 << m) - 1).map { bits =>
          val mask = Array.tabulate(m)(j => if (((bits >> j) & 1) == 1) 1.0 else 0.0)
          val size = Integer.bitCount(bits)
          (mask, (m - 1) / (binomial(m, size) * size * (m - size)))
        }
        (all.map(_._1).toArray, all.map(_._2).toArray)
      } else {
        val random = new Random(seed)
        val sizeWeights = (1 until m).map(s => (m - 1).toDouble / (s * (m - s)))
        val cumulative = sizeWeights.scanLeft(0.0)(_ + _).tail.map(_ / sizeWeights.sum)
        val drawn = (0 until (samples + 1) / 2)
          .flatMap { _ =>
            val u = random.nextDouble()
            val size = 1 + math.max(0, cumulative.indexWhere(_ >= u))
            val chosen = random.shuffle((0 until m).toList).take(size).toSet
            val mask = Array.tabulate(m)(j => if (chosen(j)) 1.0 else 0.0)
            Seq(mask, mask.map(1.0 - _))
          }
          .take(samples)
        (drawn.toArray, Array.fill(drawn.length)(1.0))
      }
    Coalitions(ends ++ masks, Array(0.0, 0.0) ++ weights)
  }

  /** The SHAP values of one row and target: `values(s)` is the model's mean value over the
    * background for coalition s of `coalitions` (s = 0 empty, 1 full). Gives [base value,
    * phi_1..phi_M] and the weighted r2 of the fit over the sampled coalitions. The efficiency
    * constraint (the phis sum to f(x) - base) is exact: the last phi is eliminated, as in the
    * paper's reference implementation.
    */
  def explain(coalitions: Coalitions, values: Array[Double]): LocalFits.Fit = {
    val masks = coalitions.masks
    val m = masks(0).length
    val base = values(0)
    val total = values(1) - base
    if (m == 1 || masks.length <= 2) {
      val phis = if (m == 0) Array.empty[Double] else Array.fill(m)(total / m)
      return LocalFits.Fit(base +: phis, 1.0)
    }
    val rows = 2 until masks.length
    val w = rows.map(coalitions.weights(_)).toArray
    // y_s - base - z_sM * total = sum_{j<M} (z_sj - z_sM) phi_j
    val x = rows.map(s => Array.tabulate(m - 1)(j => masks(s)(j) - masks(s)(m - 1))).toArray
    val y = rows.map(s => values(s) - base - masks(s)(m - 1) * total).toArray
    val a = Array.ofDim[Double](m - 1, m - 1)
    val b = new Array[Double](m - 1)
    for (s <- x.indices; i <- 0 until m - 1) {
      b(i) += w(s) * x(s)(i) * y(s)
      for (j <- 0 until m - 1) a(i)(j) += w(s) * x(s)(i) * x(s)(j)
    }
    val head = LocalFits.solveSymmetric(a, b)
    val phis = head :+ (total - head.sum)
    val observed = rows.map(values(_)).toArray
    val fitted = rows.map(s => base + (0 until m).map(j => masks(s)(j) * phis(j)).sum).toArray
    LocalFits.Fit(base +: phis, LocalFits.weightedR2(observed, fitted, w))
  }
}
