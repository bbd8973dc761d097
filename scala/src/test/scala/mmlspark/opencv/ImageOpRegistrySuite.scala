package mmlspark.opencv

import org.json4s._
import org.json4s.jackson.JsonMethods.parse
import org.scalatest.funsuite.AnyFunSuite

class ImageOpRegistrySuite extends AnyFunSuite {

  // Written by the Python fluent methods before the registry existed (an ImageTransformer saved
  // then holds this string), and what the JVM re-encoded it to at the time.
  private val savedBefore =
    """[{"op": "resize", "height": 20, "width": 30, "interpolation": 1}, {"op": "resizeShorter", "size": 16, "interpolation": 0}, {"op": "resize", "height": 12, "width": 12, "interpolation": 1}, {"op": "crop", "x": 1, "y": 2, "height": 10, "width": 11}, {"op": "centerCrop", "height": 8, "width": 9}, {"op": "colorFormat", "format": "RGB"}, {"op": "flip", "flipCode": 1}, {"op": "flip", "flipCode": 0}, {"op": "blur", "height": 3, "width": 5}, {"op": "threshold", "threshold": 100, "maxVal": 200.5, "thresholdType": 2}, {"op": "gaussianKernel", "apertureSize": 5, "sigma": 1.5}, {"op": "normalize", "mean": [0.5, 0.25, 0.125], "std": [2.0, 4.0, 8.0], "colorScaleFactor": 0.00392156862745098}]"""
  private val reencodedBefore =
    """[{"op":"resize","height":20,"width":30,"interpolation":1},{"op":"resizeShorter","size":16,"interpolation":0},{"op":"resize","height":12,"width":12,"interpolation":1},{"op":"crop","x":1,"y":2,"height":10,"width":11},{"op":"centerCrop","height":8,"width":9},{"op":"colorFormat","format":"RGB"},{"op":"flip","flipCode":1},{"op":"flip","flipCode":0},{"op":"blur","height":3,"width":5},{"op":"threshold","threshold":100.0,"maxVal":200.5,"thresholdType":2},{"op":"gaussianKernel","apertureSize":5,"sigma":1.5},{"op":"normalize","mean":[0.5,0.25,0.125],"std":[2.0,4.0,8.0],"colorScaleFactor":0.00392156862745098}]"""

  test("the JSON saved before the registry decodes to the same operations and re-encodes alike") {
    val ops = ImageOp.fromJson(savedBefore)
    assert(
      ops == Seq(
        Resize(20, 30, 1),
        ResizeShorter(16, 0),
        Resize(12, 12, 1),
        Crop(1, 2, 10, 11),
        CenterCrop(8, 9),
        ColorFormat("RGB"),
        Flip(1),
        Flip(0),
        Blur(3, 5),
        Threshold(100.0, 200.5, 2),
        GaussianKernel(5, 1.5),
        Normalize(Seq(0.5, 0.25, 0.125), Seq(2.0, 4.0, 8.0), 1.0 / 255)
      )
    )
    assert(ImageOp.toJson(ops) == reencodedBefore)
  }

  test("every registered operation round-trips through its JSON codec") {
    ImageOp.registry.foreach { spec =>
      val example = spec.example
      val json = ImageOp.toJson(Seq(example))
      assert(ImageOp.fromJson(json) == Seq(example), spec.name)
      val JArray(List(JObject(fields))) = parse(json)
      assert(fields.map(_._1) == "op" +: spec.fields.map(_.name), spec.name)
      assert(fields.head._2 == JString(spec.name))
      assert(example.op == spec.name && (ImageOp.specOf(example.getClass) eq spec))
    }
  }

  test("the registry's field names are the case classes' fields, in constructor order") {
    ImageOp.registry.foreach { spec =>
      val example = spec.example.asInstanceOf[Product]
      assert(example.productArity == spec.fields.length, spec.name)
      spec.fields.zipWithIndex.foreach { case (f, i) =>
        assert(
          spec.cls.getMethod(f.name).invoke(example) == example.productElement(i),
          s"${spec.name}.${f.name}"
        )
      }
      // Distinct values in fields of one type, so that a swap of two names would show above.
      spec.fields.groupBy(_.fieldType).values.foreach { sameType =>
        val values = sameType.map(f => spec.cls.getMethod(f.name).invoke(example))
        assert(values.distinct.length == values.length, s"${spec.name}: $values")
      }
    }
  }

  test("defaults come from the case classes and fill missing fields") {
    assert(Resize.fields.map(_.default) == Seq(None, None, Some(1)))
    assert(Flip.fields.map(_.default) == Seq(Some(1)))
    assert(Normalize.fields.map(_.default) == Seq(None, None, Some(1.0)))
    assert(
      ImageOp.fromJson("""[{"op":"resize","height":3,"width":4},{"op":"flip"}]""") ==
        Seq(Resize(3, 4, 1), Flip(1))
    )
    val missing = intercept[IllegalArgumentException](
      ImageOp.fromJson("""[{"op":"crop","x":1,"y":2,"height":3}]""")
    )
    assert(missing.getMessage.contains("""image operation {"op":"crop","x":1,"y":2,"height":3}"""))
  }

  test("enumerated fields accept exactly their OpenCV constants") {
    val badInterpolation = intercept[IllegalArgumentException](Resize(2, 2, 5).validate())
    assert(
      badInterpolation.getMessage == "resize: interpolation must be an OpenCV INTER_* code 0-4 but was 5"
    )
    val badType = intercept[IllegalArgumentException](Threshold(1, 2, -1).validate())
    assert(badType.getMessage == "threshold: thresholdType must be 0-4 but was -1")
    (0 to 4).foreach(i => Resize(2, 2, i).validate())
    assert(
      Constants.interpolation.nameOf(org.opencv.imgproc.Imgproc.INTER_AREA).contains("INTER_AREA")
    )
  }

  test("an unknown operation's message lists exactly the registry's names") {
    val error = intercept[IllegalArgumentException](ImageOp.fromJson("""[{"op":"sharpen"}]"""))
    val prefix = "unknown image operation 'sharpen'; known: "
    assert(error.getMessage.startsWith(prefix))
    assert(error.getMessage.stripPrefix(prefix).split(", ").toSeq == ImageOp.names)
    // The operations saved transformers may hold are all still known, in their order.
    assert(
      ImageOp.names.take(10) == Seq(
        "resize",
        "resizeShorter",
        "crop",
        "centerCrop",
        "colorFormat",
        "flip",
        "blur",
        "threshold",
        "gaussianKernel",
        "normalize"
      )
    )
  }

  test("the operations param doc describes every registered operation") {
    val doc = new ImageTransformer().operations.doc
    ImageOp.registry.foreach(spec => assert(doc.contains(spec.signature), spec.name))
    assert(doc.contains("resize(height, width, interpolation=1)"))
    assert(doc.contains("normalize(mean, std, colorScaleFactor=1.0)"))
  }

  test("the Scala fluent methods build the registry's operations with its defaults") {
    val stage = new ImageTransformer()
      .resize(5, 6)
      .resize(7, keepAspectRatio = true)
      .flip(0)
      .normalize(Array(0.5), Array(0.25), 2.0)
      .letterbox(64)
    assert(
      stage.getOps == Seq(
        Resize.decode(parse("""{"height":5,"width":6}""")),
        ResizeShorter.decode(parse("""{"size":7}""")),
        Flip(0),
        Normalize(Seq(0.5), Seq(0.25), 2.0),
        Letterbox.decode(parse("""{"size":64}"""))
      )
    )
  }
}
